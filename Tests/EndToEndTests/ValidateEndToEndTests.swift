import AGDevTools
import AGHTTP
import AGCrypto
import AGConfig
import AGPolicy
import AGGateway
import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// `POST /api/v1/attestation/validate` against the real gateway, with attestations made by the
/// simulated device and certified by a test CA the gateway trusts (`app_attest.test_ca`).
@Suite("validate (device onboarding), end to end")
struct ValidateEndToEndTests {
    let teamID = TestGateway.randomTeamID()
    let testCA: TestCertificateAuthority
    var appID: String { teamID + ".com.example.app" }
    var headers: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app"), ("Content-Type", "application/json")] }

    init() throws {
        testCA = try TestCertificateAuthority.generate(validDays: 2)
    }

    static let appAttestYAML = "app_attest:\n  root_ca: root-ca.pem\n  test_ca: test-ca.pem\n"

    func startGateway(redisURL: String = TestGateway.sharedRedisURL, tier: String = "test", environment: String = "development",
                      extraYAML: String = "", time: (any TimeSource)? = nil) throws -> TestGateway {
        try TestGateway(redisURL: redisURL,
                        tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: tier, environment: environment)],
                        gatewayYAML: Self.appAttestYAML + extraYAML, files: ["test-ca.pem": testCA.certificate.pemRepresentation],
                        time: time)
    }

    func device() throws -> SimulatedDevice {
        try SimulatedDevice(teamID: teamID, bundleID: "com.example.app")
    }

    /// A fresh challenge from the gateway.
    func challenge(_ gateway: TestGateway) throws -> String {
        let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
        try #require(response.status == 200, "\(response.text)")
        return try #require(response.json["challenge"] as? String)
    }

    func fields(_ device: SimulatedDevice, challenge: String, environment: SimulatedAttestationEnvironment = .development,
                subjectID: String? = nil) throws -> [String: String] {
        let (object, hash) = try device.makeAttestation(challenge: challenge, testCA: testCA, environment: environment)
        var fields = ["keyId": device.keyID, "attestationObject": Base64.encode(object),
                      "clientDataHash": Base64.encode(hash), "challenge": challenge]
        if let subjectID { fields["subjectId"] = subjectID }
        return fields
    }

    func body(_ fields: [String: String]) -> [UInt8] {
        Array(try! JSONSerialization.data(withJSONObject: fields))
    }

    func validate(_ gateway: TestGateway, _ fields: [String: String]) throws -> TestResponse {
        try gateway.send("POST", "/api/v1/attestation/validate", headers: headers, body: body(fields))
    }

    func deviceField(_ gateway: TestGateway, _ device: SimulatedDevice, _ field: String) throws -> String {
        try RedisCLI.run(gateway.redisURL, "HGET", "ag:{\(appID)}:dev:\(device.keyID)", field)
    }

    @Test func attestThenRefresh() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        #expect(gateway.logText().contains("TEST CA TRUSTED"))
        var device = try device()
        let subject = UUID().uuidString.lowercased()
        let response = try validate(gateway, fields(device, challenge: challenge(gateway), subjectID: subject))
        #expect(response.status == 200, "\(response.text)")
        #expect(response.json["isValid"] as? Bool == true)
        let token = try #require(response.json["token"] as? String)
        #expect((response.json["expiresAt"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
        let jwks = try gateway.send("GET", "/.well-known/jwks.json")
        let verified = try #require(try independentlyVerifiedJWT(jwks: jwks.text, token: token), "token does not verify")
        let claims = try #require(verified["claims"] as? [String: Any])
        #expect(claims["sub"] as? String == device.keyID)
        #expect(claims["team_id"] as? String == teamID)
        #expect(claims["bundle_id"] as? String == "com.example.app")
        #expect(claims["aud"] as? String == appID)
        #expect(claims["subject_id"] as? String == subject)

        #expect(try deviceField(gateway, device, "pk") == Base64.encode(device.publicKeyX963))
        #expect(try deviceField(gateway, device, "ctr") == "0")
        #expect(try deviceField(gateway, device, "env") == "development")
        #expect(try deviceField(gateway, device, "rev") == "0")
        #expect(try !deviceField(gateway, device, "rcpt").isEmpty)
        #expect(try RedisCLI.run(gateway.redisURL, "SISMEMBER", "ag:{\(appID)}:mad:\(currentMonth())", device.keyID) == "1")

        // The same device now refreshes with assertions (counter 1).
        let refreshChallenge = try challenge(gateway)
        let (assertion, hash) = try device.makeAssertion(challenge: refreshChallenge)
        let refresh = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: body([
            "keyId": device.keyID, "assertion": Base64.encode(assertion), "clientDataHash": Base64.encode(hash),
            "challenge": refreshChallenge,
        ]))
        #expect(refresh.status == 200, "\(refresh.text)")
        #expect(try deviceField(gateway, device, "ctr") == "1")
        #expect(try deviceField(gateway, device, "subj") == subject, "the link made at attestation is kept")
        #expect(!gateway.logText().contains(Base64.encode(assertion).prefix(40)))
    }

    @Test func productionTenantNeedsTheProductionAAGUID() throws {
        let gateway = try startGateway(environment: "production", extraYAML: "app_attest:\n  root_ca: root-ca.pem\n  test_ca: test-ca.pem\n  allow_test_ca: true\n")
        defer { gateway.stop() }
        let device = try device()
        let development = try validate(gateway, fields(device, challenge: challenge(gateway), environment: .development))
        #expect(development.status == 401)
        #expect(development.code == "apple_validation_failed")
        let production = try validate(gateway, fields(device, challenge: challenge(gateway), environment: .production))
        #expect(production.status == 200, "\(production.text)")
        #expect(try deviceField(gateway, device, "env") == "production")
    }

    @Test func malformedRequestsAreRefusedBeforeRedis() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let device = try device()
        let challenge = try challenge(gateway)
        let good = try fields(device, challenge: challenge)
        func without(_ key: String) -> [UInt8] {
            var copy = good
            copy.removeValue(forKey: key)
            return body(copy)
        }
        func with(_ key: String, _ value: String) -> [UInt8] {
            var copy = good
            copy[key] = value
            return body(copy)
        }
        let notAttestation = Base64.encode(CBOREncoder().encode(.map([(.text("fmt"), .text("packed"))])))
        let noReceipt = Base64.encode(CBOREncoder().encode(.map([
            (.text("fmt"), .text("apple-appattest")),
            (.text("attStmt"), .map([(.text("x5c"), .array([.bytes([1]), .bytes([2])]))])),
            (.text("authData"), .bytes([UInt8](repeating: 0, count: 60))),
        ])))
        let cases: [(String, [UInt8], String)] = [
            ("no keyId", without("keyId"), "bad_request"),
            ("no attestationObject", without("attestationObject"), "bad_request"),
            ("no clientDataHash", without("clientDataHash"), "bad_request"),
            ("no challenge", without("challenge"), "bad_request"),
            ("subjectId not a UUID", with("subjectId", "household-1"), "bad_request"),
            ("not JSON", Array("{keyId:".utf8), "bad_request"),
            ("JSON array", Array("[]".utf8), "bad_request"),
            ("body too large", Array(repeating: UInt8(ascii: " "), count: 70_000) + body(good), "bad_request"),
            ("keyId not base64", with("keyId", "not base64!"), "key_id_invalid"),
            ("keyId of 16 bytes", with("keyId", Base64.encode([UInt8](repeating: 1, count: 16))), "key_id_invalid"),
            ("attestationObject not base64", with("attestationObject", "%%%"), "attestation_object_invalid"),
            ("attestationObject not CBOR", with("attestationObject", Base64.encode([0xFF, 0x00, 0x13])), "attestation_object_invalid"),
            ("attestationObject of another format", with("attestationObject", notAttestation), "attestation_object_invalid"),
            ("attestationObject without receipt", with("attestationObject", noReceipt), "attestation_object_invalid"),
            ("clientDataHash not base64", with("clientDataHash", "***"), "client_data_hash_invalid"),
            ("clientDataHash of 20 bytes", with("clientDataHash", Base64.encode([UInt8](repeating: 1, count: 20))), "client_data_hash_invalid"),
            ("clientDataHash of another challenge", with("clientDataHash", Base64.encode(SHA256.hash("other".utf8))), "client_data_hash_invalid"),
        ]
        for (name, requestBody, code) in cases {
            let response = try gateway.send("POST", "/api/v1/attestation/validate", headers: headers, body: requestBody)
            #expect(response.status == 400, "\(name): \(response.text)")
            #expect(response.code == code, "\(name)")
            #expect(response.header("X-RateLimit-Limit") == nil, "\(name) took a rate-limit token")
            #expect(try !gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"), "\(name) spent the challenge")
        }
        #expect(try deviceField(gateway, device, "pk").isEmpty)
        let get = try gateway.send("GET", "/api/v1/attestation/validate", headers: headers)
        #expect(get.status == 405)
        let noTenant = try gateway.send("POST", "/api/v1/attestation/validate", body: body(good))
        #expect(noTenant.status == 400)
        #expect(noTenant.code == "bad_request")
        let unknown = try gateway.send("POST", "/api/v1/attestation/validate",
                                       headers: [("X-Team-ID", "ZZZZZZZZZZ"), ("X-Bundle-ID", "com.example.app")], body: body(good))
        #expect(unknown.status == 401)
        #expect(unknown.code == "unknown_tenant")
        // The untouched request still attests.
        #expect(try validate(gateway, good).status == 200)
    }

    @Test func challengeStates() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let device = try device()
        let unknown = try validate(gateway, fields(device, challenge: "never-issued-challenge"))
        #expect(unknown.status == 400)
        #expect(unknown.code == "challenge_invalid")

        try gateway.putChallenge(appID: appID, challenge: "old-challenge", ageSeconds: 301)
        let expired = try validate(gateway, fields(device, challenge: "old-challenge"))
        #expect(expired.status == 400)
        #expect(expired.code == "challenge_expired")

        let challenge = try challenge(gateway)
        #expect(try validate(gateway, fields(device, challenge: challenge)).status == 200)
        let used = try validate(gateway, fields(device, challenge: challenge))
        #expect(used.status == 400)
        #expect(used.code == "challenge_already_used")
        #expect(try deviceField(gateway, device, "pk").isEmpty == false)
    }

    @Test func failedVerificationSpendsTheCheckedChallenge() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let device = try device()
        let other = try SimulatedDevice(teamID: teamID, bundleID: "com.example.app")

        // Certified by a CA the gateway does not trust.
        let untrusted = try TestCertificateAuthority.generate(validDays: 1)
        let challenge = try challenge(gateway)
        let (object, hash) = try device.makeAttestation(challenge: challenge, testCA: untrusted, environment: .development)
        let response = try validate(gateway, ["keyId": device.keyID, "attestationObject": Base64.encode(object),
                                              "clientDataHash": Base64.encode(hash), "challenge": challenge])
        #expect(response.status == 401)
        #expect(response.code == "apple_validation_failed")
        #expect(response.header("WWW-Authenticate") == "AppAttest", "RFC 9110 section 15.5.2: a 401 carries a challenge")
        #expect(try gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"), "checked, so spent")
        #expect(try deviceField(gateway, device, "pk").isEmpty, "nothing stored")

        // The attestation of one key presented under another keyId.
        let second = try self.challenge(gateway)
        var swapped = try fields(device, challenge: second)
        swapped["keyId"] = other.keyID
        let mismatch = try validate(gateway, swapped)
        #expect(mismatch.status == 401)
        #expect(mismatch.code == "apple_validation_failed")
        #expect(try deviceField(gateway, other, "pk").isEmpty)
        // Two rejections, one log line per tenant and 10 s (anyone with a challenge can send junk;
        // stop 34, independent growth sweep: a line each), two if they straddled an interval.
        #expect(eventually { gateway.logText().contains("attestation rejected") })
        let lines = gateway.logText().components(separatedBy: "attestation rejected").count - 1
        let third = try self.challenge(gateway)
        var again = try fields(device, challenge: third)
        again["keyId"] = other.keyID
        #expect(try validate(gateway, again).status == 401)
        #expect(lines <= 2 && gateway.logText().components(separatedBy: "attestation rejected").count - 1 <= 2)
    }

    /// Own Redis: the real vectors' App ID and challenge are shared with the refresh tests.
    @Test func aRealDeviceAttestationWithAnExpiredLeafIsRefused() async throws {
        try await RedisServer.withPrivate { redis in try realDeviceAttestationIsRefused(redisURL: "redis://127.0.0.1:\(redis.port)/0") }
    }

    func realDeviceAttestationIsRefused(redisURL: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: TestGateway.fixturePath("app-attest-real-devices.json")))
        let root = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let vector = (root["attestations"] as! [[String: Any]])[0]
        let team = vector["teamId"] as! String
        let bundle = vector["bundleId"] as! String
        let gateway = try TestGateway(redisURL: redisURL, tenants: ["a.yaml": TestGateway.tenantYAML(teamID: team, bundleID: bundle)])
        defer { gateway.stop() }
        let appID = team + "." + bundle
        let challenge = vector["challenge"] as! String
        try #require(Base64.encode(SHA256.hash(challenge.utf8)) == vector["clientDataHash"] as? String)
        try gateway.putChallenge(appID: appID, challenge: challenge)
        let response = try gateway.send("POST", "/api/v1/attestation/validate",
                                        headers: [("X-Team-ID", team), ("X-Bundle-ID", bundle), ("Content-Type", "application/json")],
                                        body: body(["keyId": vector["keyId"] as! String,
                                                    "attestationObject": vector["attestationObject"] as! String,
                                                    "clientDataHash": vector["clientDataHash"] as! String, "challenge": challenge]))
        #expect(response.status == 401, "\(response.text)")
        #expect(response.code == "apple_validation_failed")
        #expect(gateway.logText().contains("certificateChainInvalid"))
    }

    @Test func reattestationReplacesTheRecordButARevokedKeyStaysRevoked() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        var device = try device()
        #expect(try validate(gateway, fields(device, challenge: challenge(gateway))).status == 200)
        let refreshChallenge = try challenge(gateway)
        let (assertion, hash) = try device.makeAssertion(challenge: refreshChallenge)
        _ = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: body([
            "keyId": device.keyID, "assertion": Base64.encode(assertion), "clientDataHash": Base64.encode(hash),
            "challenge": refreshChallenge,
        ]))
        #expect(try deviceField(gateway, device, "ctr") == "1")
        #expect(try validate(gateway, fields(device, challenge: challenge(gateway))).status == 200)
        #expect(try deviceField(gateway, device, "ctr") == "0", "re-attestation replaces the record")

        let revoke = try gateway.admin("POST", "/admin/v1/tenants/\(appID)/keys/\(device.keyIDForPath)/revoke")
        #expect(revoke.status == 200)
        let challenge = try challenge(gateway)
        let revoked = try validate(gateway, fields(device, challenge: challenge))
        #expect(revoked.status == 403)
        #expect(revoked.code == "forbidden")
        #expect(try !gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"))
        #expect(try deviceField(gateway, device, "rev") == "1")
    }

    @Test func monthlyActiveDeviceQuota() throws {
        let time = ManualTime()
        // A tier of its own: the runtime change below is kept in the shared Redis, where another
        // test's tier of the same name would pick it up.
        let tier = "quota-" + teamID.lowercased()
        let gateway = try startGateway(tier: tier, extraYAML: """
            tiers:
              \(tier): { attest: 1000, challenge: 1000, api: 1000, mad_limit: 1 }
            quotas:
              grace: 1h
            """, time: time)
        defer { gateway.stop() }
        let first = try device()
        #expect(try validate(gateway, fields(first, challenge: challenge(gateway))).status == 200)
        let second = try device()
        #expect(try validate(gateway, fields(second, challenge: challenge(gateway))).status == 200, "over the limit, in the grace period")
        time.advance(.seconds(3601))
        let third = try device()
        let challenge = try challenge(gateway)
        let refused = try validate(gateway, fields(third, challenge: challenge))
        #expect(refused.status == 402, "\(refused.text)")
        #expect(refused.code == "quota_exceeded")
        #expect(refused.json["limit"] as? Int == 1)
        #expect(refused.json["current"] as? Int == 2)
        #expect(try !gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"))
        #expect(try deviceField(gateway, third, "pk").isEmpty)
        // The counted device may attest again.
        #expect(try validate(gateway, fields(first, challenge: self.challenge(gateway))).status == 200)
        // The limit (1) was the warning threshold too (ceil(0.8 × 1)): both milestones logged.
        #expect(eventually { gateway.logText().contains("monthly active devices reached the warning ratio") })
        #expect(eventually { gateway.logText().contains("monthly active device limit reached") })

        // A raised limit (a tier upgrade) leaves the old grace period behind: the tenant is
        // under its limit again, and reaching the new one starts a grace period of its own.
        #expect(try gateway.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"mad_limit": 4}"#).status == 200)
        let raised = try gateway.admin("GET", "/admin/v1/tenants/\(appID)/usage")
        #expect(raised.json["exceeded"] as? Bool == false && raised.json["inGrace"] as? Bool == false, "\(raised.text)")
        #expect(raised.json["graceStartedAt"] == nil)
        for _ in 0..<2 {
            #expect(try validate(gateway, fields(device(), challenge: self.challenge(gateway))).status == 200, "under the new limit")
        }
        #expect(try validate(gateway, fields(device(), challenge: self.challenge(gateway))).status == 200,
                "at the new limit: a new grace period")
        let inGrace = try gateway.admin("GET", "/admin/v1/tenants/\(appID)/usage")
        #expect(inGrace.json["activeDevices"] as? Int == 5)
        #expect(inGrace.json["inGrace"] as? Bool == true && inGrace.json["exceeded"] as? Bool == false, "\(inGrace.text)")
        time.advance(.seconds(3601))
        let over = try validate(gateway, fields(device(), challenge: self.challenge(gateway)))
        #expect(over.status == 402)
        #expect(over.code == "quota_exceeded")
        #expect(over.json["limit"] as? Int == 4)
        #expect(over.json["current"] as? Int == 5)
        #expect(try gateway.admin("GET", "/admin/v1/tenants/\(appID)/usage").json["exceeded"] as? Bool == true)
    }

    @Test func perIPValidateLimit() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try startGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0", extraYAML: """
                ip_limits:
                  challenge: 100
                  validate: 2
                """)
            defer { gateway.stop() }
            let device = try device()
            var statuses: [Int] = []
            var last: TestResponse?
            var lastChallenge = ""
            for _ in 0..<3 {
                lastChallenge = try challenge(gateway)
                last = try validate(gateway, fields(device, challenge: lastChallenge))
                statuses.append(last!.status)
            }
            #expect(statuses == [200, 200, 429])
            #expect(last?.code == "rate_limited")
            #expect(last?.header("Retry-After") != nil)
            #expect(try !gateway.challengeState(appID: appID, challenge: lastChallenge).hasPrefix("used:"), "rate-limited: not spent")
        }
    }

    @Test func failsClosedWhileRedisIsDown() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try startGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0")
            defer { gateway.stop() }
            let device = try device()
            let good = try fields(device, challenge: challenge(gateway))
            redis.kill()
            let response = try validate(gateway, good)
            #expect(response.status == 503)
            #expect(response.code == "store_unavailable")
        }
    }

    @Test func theDeviceClientAttestsThenRefreshes() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let configuration = DeviceSessionConfiguration(gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"))
        let session = DeviceSession(configuration: configuration, device: try device())
        let attested = try session.attest(testCA: testCA)
        #expect(try attested.decoded().claims["sub"]?.stringValue == session.device.keyID)
        let refreshed = try session.refresh()
        #expect(try refreshed.decoded().claims["sub"]?.stringValue == session.device.keyID)
        #expect(session.device.counter == 1)
    }

    func currentMonth() -> String {
        let components = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date())
        return String(format: "%04d%02d", components.year!, components.month!)
    }
}

@Suite("test CA configuration and generation")
struct TestCAConfigurationTests {
    @Test func anUnparsableTestCAIsAConfigurationError() throws {
        let teamID = TestGateway.randomTeamID()
        do {
            let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)],
                                          gatewayYAML: ValidateEndToEndTests.appAttestYAML, files: ["test-ca.pem": "not a certificate"])
            gateway.stop()
            Issue.record("the gateway started with an unparsable test CA")
        } catch {
            #expect(String(describing: error).contains("app_attest.test_ca"), "\(error)")
        }
    }

    @Test func testCACommandWritesAUsableAuthority() throws {
        let directory = NSTemporaryDirectory() + "attestgate-test-ca-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let written = try TestCAGenerator.generate(directory: directory)
        let keyMode = try FileManager.default.attributesOfItem(atPath: written.key)[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
        let authority = try TestCertificateAuthority(certificatePEM: TestFile.text(written.certificate),
                                                     privateKeyPEM: TestFile.text(written.key))
        #expect(try authority.certificate.extensionValue(oid: "2.5.29.19") != nil)
        #expect { try TestCAGenerator.generate(directory: directory) } throws: { error in
            guard case .file(let failure) = error as? TestCAGenerator.Failure else { return false }
            return failure.alreadyExists
        }
    }
}
