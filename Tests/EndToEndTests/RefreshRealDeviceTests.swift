import AGCrypto
import AGPolicy
import AGTestSupport
import Foundation
import Testing

/// The refresh endpoint with assertions made by physical iOS devices.
/// Serialized: the vectors share App IDs, so these tests share Redis keys.
@Suite("refresh with real device assertions", .serialized, .onOwnThreads)
struct RefreshRealDeviceTests {
    let vectors: [RealAssertionVector]

    init() throws {
        vectors = try RealAssertionVector.load()
    }

    func startGateway(extraGatewayYAML: String = "", tier: String = "free", time: (any TimeSource)? = nil) throws -> TestGateway {
        var tenants: [String: String] = [:]
        for vector in vectors where tenants[vector.appID] == nil {
            tenants[vector.appID] = TestGateway.tenantYAML(teamID: vector.teamID, bundleID: vector.bundleID, tier: tier)
        }
        let gateway = try TestGateway(tenants: Dictionary(uniqueKeysWithValues: tenants.map { ("\($0.key).yaml", $0.value) }),
                                      gatewayYAML: extraGatewayYAML, time: time)
        for appID in tenants.keys { try gateway.clearTenantKeys(appID: appID) }
        return gateway
    }

    func headers(_ vector: RealAssertionVector) -> [(String, String)] {
        [("X-Team-ID", vector.teamID), ("X-Bundle-ID", vector.bundleID), ("Content-Type", "application/json")]
    }

    func body(_ vector: RealAssertionVector, assertion: String? = nil, subjectID: String? = nil) -> [UInt8] {
        let hash = Data(SHA256.hash(Array(vector.challenge.utf8))).base64EncodedString()
        var fields: [String: String] = ["keyId": vector.keyID, "assertion": assertion ?? vector.assertion,
                                        "clientDataHash": hash, "challenge": vector.challenge]
        if let subjectID { fields["subjectId"] = subjectID }
        return Array(try! JSONSerialization.data(withJSONObject: fields))
    }

    func prepare(_ gateway: TestGateway, _ vector: RealAssertionVector, counter: Int? = nil) throws {
        let imported = try gateway.importKey(appID: vector.appID, keyID: vector.keyID, publicKey: vector.publicKeyPEM,
                                             counter: counter ?? vector.previousCounter)
        try #require(imported.status == 200, "\(imported.text)")
        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge)
    }

    @Test func everyRealAssertionRefreshesAndTheTokenVerifiesIndependently() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let jwks = try gateway.send("GET", "/.well-known/jwks.json")
        #expect(jwks.status == 200)
        #expect(jwks.header("Cache-Control") == "public, max-age=300")
        for vector in vectors {
            try prepare(gateway, vector)
            let response = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
            #expect(response.status == 200, "\(vector.keyID): \(response.text)")
            let token = try #require(response.json["token"] as? String)
            let expiresAt = try #require((response.json["expiresAt"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
            #expect(abs(expiresAt.timeIntervalSinceNow - 3600) < 10)
            let verified = try #require(try independentlyVerifiedJWT(jwks: jwks.text, token: token), "token does not verify")
            let claims = try #require(verified["claims"] as? [String: Any])
            let header = try #require(verified["header"] as? [String: Any])
            #expect(header["alg"] as? String == "ES256")
            #expect(header["kid"] as? String == "test-es256")
            #expect(claims["sub"] as? String == vector.keyID)
            #expect(claims["team_id"] as? String == vector.teamID)
            #expect(claims["bundle_id"] as? String == vector.bundleID)
            #expect(claims["aud"] as? String == vector.appID)
            #expect(claims["iss"] as? String == "https://attestgate.test")
            #expect((claims["exp"] as? Int).map { $0 - (claims["iat"] as? Int ?? 0) } == 3600)
            #expect(claims["nbf"] as? Int == claims["iat"] as? Int)
            #expect((claims["jti"] as? String)?.isEmpty == false)
            #expect(claims["subject_id"] == nil)
            #expect(try RedisCLI.run(gateway.redisURL, "HGET", "ag:{\(vector.appID)}:dev:\(vector.keyID)", "ctr") == String(vector.counter))
            #expect(try gateway.challengeState(appID: vector.appID, challenge: vector.challenge).hasPrefix("used:"))
        }
        #expect(eventually { gateway.accessLogText().components(separatedBy: "\"route\":\"refresh\"").count - 1 == vectors.count },
                "the access log has been written")
        #expect(!gateway.accessLogText().contains(vectors[0].assertion.prefix(40)))
        #expect(!gateway.logText().contains(vectors[0].assertion.prefix(40)))
    }

    @Test func aReplayedAssertionRequiresReattestation() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let vector = vectors[0]
        try prepare(gateway, vector)
        #expect(try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector)).status == 200)
        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge)
        let replay = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(replay.status == 409)
        #expect(replay.code == "reattest_required")
        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge)
        let after = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(after.status == 404, "the stored attestation is invalidated")
        #expect(after.code == "not_found")
    }

    @Test func onlyOneOfManyConcurrentRefreshesOfOneAssertionSucceeds() async throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let vector = vectors[1]
        try prepare(gateway, vector)
        let requestBody = body(vector)
        let requestHeaders = headers(vector)
        let port = gateway.port
        let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for _ in 0..<24 {
                group.addTask {
                    let response = try HTTPTestClient.send(port: port, "POST", "/api/v1/attestation/refresh",
                                                           headers: requestHeaders, body: requestBody)
                    return (response.status, response.code)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.filter { $0.0 == 200 }.count == 1)
        #expect(statuses.filter { $0.0 == 400 && $0.1 == "challenge_already_used" }.count == 23)
        #expect(try RedisCLI.run(gateway.redisURL, "HGET", "ag:{\(vector.appID)}:dev:\(vector.keyID)", "ctr") == "1")
    }

    @Test func errorsChangeNoStateUnlessTheChallengeWasSpent() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let vector = vectors[2]
        try prepare(gateway, vector)
        let good = body(vector)
        let object = try JSONSerialization.jsonObject(with: Data(good)) as! [String: String]
        func without(_ key: String) -> [UInt8] {
            var copy = object
            copy.removeValue(forKey: key)
            return Array(try! JSONSerialization.data(withJSONObject: copy))
        }
        func with(_ key: String, _ value: String) -> [UInt8] {
            var copy = object
            copy[key] = value
            return Array(try! JSONSerialization.data(withJSONObject: copy))
        }
        let malformed: [(String, [UInt8])] = [
            ("no keyId", without("keyId")), ("no assertion", without("assertion")),
            ("no clientDataHash", without("clientDataHash")), ("no challenge", without("challenge")),
            ("assertion not base64", with("assertion", "%%%")), ("keyId not base64", with("keyId", "not base64!")),
            ("clientDataHash not base64", with("clientDataHash", "***")),
            ("clientDataHash of another challenge", with("clientDataHash", Data(repeating: 1, count: 32).base64EncodedString())),
            ("subjectId not a UUID", with("subjectId", "household-1")),
            ("not JSON", Array("{keyId:".utf8)), ("JSON array", Array("[]".utf8)),
            ("body too large", Array(repeating: UInt8(ascii: " "), count: 70_000) + good),
        ]
        for (name, requestBody) in malformed {
            let response = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: requestBody)
            #expect(response.status == 400, "\(name)")
            #expect(response.code == "bad_request", "\(name)")
            #expect(try !gateway.challengeState(appID: vector.appID, challenge: vector.challenge).hasPrefix("used:"), "\(name) spent the challenge")
        }
        // A flipped bit in the signature: the challenge is checked and spent, but a signature
        // that does not verify proves nothing about the device, whose record stays.
        var assertion = Array(Data(base64Encoded: vector.assertion)!)
        assertion[20] ^= 0x01
        let forged = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector),
                                      body: body(vector, assertion: Data(assertion).base64EncodedString()))
        #expect(forged.status == 409)
        #expect(forged.code == "reattest_required")
        #expect(try gateway.challengeState(appID: vector.appID, challenge: vector.challenge).hasPrefix("used:"))
        #expect(try gateway.admin("GET", "/admin/v1/tenants/\(vector.appID)/keys/\(urlKeyID(vector.keyID))").status == 200)
        // The device's genuine assertion still refreshes.
        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge)
        let genuine = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(genuine.status == 200, "\(genuine.text)")
    }

    @Test func challengeStates() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let vector = vectors[3]
        #expect(try gateway.importKey(appID: vector.appID, keyID: vector.keyID, publicKey: vector.publicKeyPEM, counter: 0).status == 200)
        let unknown = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(unknown.status == 400)
        #expect(unknown.code == "challenge_invalid")

        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge, ageSeconds: 301)
        let expired = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(expired.status == 400)
        #expect(expired.code == "challenge_expired")

        try RedisCLI.run(gateway.redisURL, "SET", "ag:{\(vector.appID)}:ch:\(vector.challenge)", "used:1", "PX", "60000")
        let used = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(used.status == 400)
        #expect(used.code == "challenge_already_used")
        #expect(try RedisCLI.run(gateway.redisURL, "HGET", "ag:{\(vector.appID)}:dev:\(vector.keyID)", "ctr") == "0")
    }

    @Test func revokedAndUnknownDevices() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let vector = vectors[4]
        try gateway.putChallenge(appID: vector.appID, challenge: vector.challenge)
        let unknown = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(unknown.status == 404)
        #expect(unknown.code == "not_found")
        #expect(try !gateway.challengeState(appID: vector.appID, challenge: vector.challenge).hasPrefix("used:"))

        try prepare(gateway, vector)
        let revoke = try gateway.admin("POST", "/admin/v1/tenants/\(vector.appID)/keys/\(urlKeyID(vector.keyID))/revoke")
        #expect(revoke.status == 200)
        let revoked = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(vector), body: body(vector))
        #expect(revoked.status == 403)
        #expect(revoked.code == "forbidden")
        #expect(try !gateway.challengeState(appID: vector.appID, challenge: vector.challenge).hasPrefix("used:"))
        let record = try gateway.admin("GET", "/admin/v1/tenants/\(vector.appID)/keys/\(urlKeyID(vector.keyID))")
        #expect(record.json["revoked"] as? Bool == true)
    }

    @Test func monthlyActiveDeviceQuotaWithGracePeriod() throws {
        let time = ManualTime()
        let gateway = try startGateway(extraGatewayYAML: """
            tiers:
              tiny: { attest: 1000, challenge: 1000, api: 1000, mad_limit: 1 }
            quotas:
              grace: 1h
            """, tier: "tiny", time: time)
        defer { gateway.stop() }
        let devices = vectors.filter { $0.appID == vectors[0].appID }
        for device in devices.prefix(2) {
            try prepare(gateway, device)
            let response = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(device), body: body(device))
            #expect(response.status == 200, "first device counted, second passes in the grace period: \(response.text)")
        }
        time.advance(.seconds(3601))
        let third = devices[2]
        try prepare(gateway, third)
        let refused = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(third), body: body(third))
        #expect(refused.status == 402)
        #expect(refused.code == "quota_exceeded")
        #expect(refused.json["limit"] as? Int == 1)
        #expect(refused.json["current"] as? Int == 2)
        #expect(try !gateway.challengeState(appID: third.appID, challenge: third.challenge).hasPrefix("used:"))

        // A device already counted this month still refreshes.
        try prepare(gateway, devices[0], counter: 0)
        let counted = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers(devices[0]), body: body(devices[0]))
        #expect(counted.status == 200)

        let usage = try gateway.admin("GET", "/admin/v1/tenants/\(third.appID)/usage")
        #expect(usage.status == 200)
        #expect(usage.json["activeDevices"] as? Int == 2)
        #expect(usage.json["limit"] as? Int == 1)
        #expect(usage.json["exceeded"] as? Bool == true)
    }

    func urlKeyID(_ keyID: String) -> String {
        keyID.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
