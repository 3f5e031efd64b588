import AGCrypto
import AGDevice
import AGFormats
import AGPolicy
import Foundation
import Testing

@testable import AGGateway

/// The attestation routes' decisions, in process: each store answer's status and code, and
/// that refused requests never reach the state they must not touch.
@Suite("attestation routes (in process)")
struct AttestationRouteTests {
    static let headers = RouterHarness.tenantHeaders + [("Content-Type", "application/json")]

    /// A well-formed refresh body by `device` for `challenge`.
    static func refreshBody(_ device: inout SimulatedDevice, challenge: String = "c1") throws -> [UInt8] {
        let (assertion, hash) = try device.makeAssertion(challenge: challenge)
        let json: JSONValue = ["keyId": .string(device.keyID), "assertion": .string(Base64.encode(assertion)),
                               "clientDataHash": .string(Base64.encode(hash)), "challenge": .string(challenge)]
        return json.serialized()
    }

    static func allowed(_ harness: RouterHarness) -> RateLimitOutcome {
        let check = harness.tenant.bucket(.attest, tier: harness.snapshot.gateway.tiers["test"]!)
        return .allowed(BucketDecision(check: check, decision: TokenBucket.Decision(
            allowed: true, limit: check.limitPerMinute, remaining: 9, resetAt: 1_800_000_001, retryAfter: 0)))
    }

    @Test("malformed refreshes are refused before the store", arguments: [
        "", "[]", "{}", #"{"keyId":"a"}"#,
        #"{"keyId":"AAAA","assertion":"AAAA","clientDataHash":"AAAA","challenge":"c"}"#,
    ])
    func malformedRefresh(body: String) throws {
        let harness = try RouterHarness()
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers, body: Array(body.utf8))
        #expect(response.status == 400)
        #expect(response.code == "bad_request")
        #expect(harness.devices.writes == 0)
        #expect(response.header("X-RateLimit-Limit") == nil, "no rate-limit token taken")
    }

    @Test("every refusal of the prepare step", arguments: [
        (DeviceRefusal.notFound, 404, "not_found"), (.forbidden, 403, "forbidden"),
        (.challengeInvalid, 400, "challenge_invalid"), (.challengeAlreadyUsed, 400, "challenge_already_used"),
        (.challengeExpired, 400, "challenge_expired"), (.quotaExceeded(limit: 5, current: 6), 402, "quota_exceeded"),
    ])
    func prepareRefusals(refusal: DeviceRefusal, status: Int, code: String) throws {
        let harness = try RouterHarness()
        var device = try SimulatedDevice(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app")
        harness.devices.prepareRefreshReply = .success((Self.allowed(harness), .refused(refusal)))
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers,
                                    body: try Self.refreshBody(&device))
        #expect(response.status == status)
        #expect(response.code == code)
        #expect(response.header("X-RateLimit-Remaining") == "9")
        #expect(harness.devices.committedRefreshes.isEmpty && harness.devices.invalidated.isEmpty)
        let quotaRefused = harness.metrics.counters["attestgate_quota_refused_total{tenant=\"\(RouterHarness.appID)\"}"]
        if case .quotaExceeded = refusal {
            #expect(response.json["limit"] as? Int == 5)
            #expect(response.json["current"] as? Int == 6)
            // DESIGN section 10's quota-refused count (an operations sweep, stop 35, found none).
            #expect(quotaRefused == 1)
        } else {
            #expect(quotaRefused == nil)
        }
    }

    @Test func aRateLimitedRefreshGoesNoFurther() throws {
        let harness = try RouterHarness()
        var device = try SimulatedDevice(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app")
        let check = harness.tenant.bucket(.attest, tier: harness.snapshot.gateway.tiers["test"]!)
        let refused = BucketDecision(check: check, decision: TokenBucket.Decision(
            allowed: false, limit: 60, remaining: 0, resetAt: 1_800_000_001, retryAfter: 1))
        harness.devices.prepareRefreshReply = .success((.limited(refused), .refused(.rateLimited)))
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers, body: try Self.refreshBody(&device))
        #expect(response.status == 429)
        #expect(response.code == "rate_limited")
        #expect(response.header("Retry-After") == "1")
        #expect(harness.metrics.counters["attestgate_rate_limited_total{tenant=\"\(RouterHarness.appID)\",bucket=\"attest\"}"] == 1)
        #expect(harness.devices.committedRefreshes.isEmpty)
    }

    @Test func aStoreFailureIs503AndLogged() throws {
        let harness = try RouterHarness()
        var device = try SimulatedDevice(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app")
        harness.devices.prepareRefreshReply = .failure(StoreFailure(description: "timed out"))
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers, body: try Self.refreshBody(&device))
        #expect(response.status == 503)
        #expect(response.code == "store_unavailable")
        #expect(harness.metrics.counters["attestgate_redis_errors_total"] == 1)
        #expect(harness.log.all.contains { $0.hasPrefix("state store failed") })
    }

    @Test("commit refusals", arguments: [
        (DeviceRefusal.counterConflict, 409, "reattest_required"), (.forbidden, 403, "forbidden"), (.notFound, 404, "not_found"),
    ])
    func commitRefusals(refusal: DeviceRefusal, status: Int, code: String) throws {
        let harness = try RouterHarness()
        var device = try SimulatedDevice(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app")
        harness.devices.prepareRefreshReply = .success((Self.allowed(harness),
                                                        .ready(publicKey: device.publicKeyX963, counter: 0, subjectID: nil)))
        harness.devices.commitRefreshReply = .success(.refused(refusal))
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers, body: try Self.refreshBody(&device))
        #expect(response.status == status)
        #expect(response.code == code)
        #expect(harness.devices.committedRefreshes.map(\.newCounter) == [1])
    }

    @Test func aGoodRefreshIssuesATokenOnTheInjectedClock() throws {
        let harness = try RouterHarness()
        var device = try SimulatedDevice(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app")
        harness.devices.prepareRefreshReply = .success((Self.allowed(harness),
                                                        .ready(publicKey: device.publicKeyX963, counter: 0, subjectID: nil)))
        harness.devices.commitRefreshReply = .success(.committed(subjectID: "s-1", subscription: #"{"tier":"gold"}"#,
                                                                 newlyCounted: true, monthlyCount: 1))
        let response = harness.send("POST", "/api/v1/attestation/refresh", headers: Self.headers, body: try Self.refreshBody(&device))
        #expect(response.status == 200)
        // 1_800_000_000 + the default 1 h token lifetime.
        #expect(response.json["expiresAt"] as? String == UTCDateTime(unixSeconds: 1_800_003_600).iso8601())
        let token = try #require(response.json["token"] as? String)
        let verified = try harness.snapshot.tokenKeys.verifier.verify(token)
        #expect(verified.claims["iat"] == .integer(1_800_000_000))
        #expect(verified.claims["subject_id"] == "s-1")
        #expect(verified.claims["custom_claims"]?["subscription"]?["tier"] == "gold")
        #expect(harness.metrics.counters[harness.tenant.series.tokensIssued] == 1)
        #expect(harness.accessLog.lines.count == 1)
        #expect(!harness.accessLog.lines[0].contains(token), "tokens never reach the access log")
    }

    /// The access log's `client` is the client address the per-IP buckets use: behind a
    /// trusted proxy, the nearest untrusted `X-Forwarded-For` entry, not the proxy (an
    /// operations sweep, stop 35, found every line naming the balancer).
    @Test func theAccessLogNamesTheClientBehindATrustedProxy() throws {
        let harness = try RouterHarness(gatewayYAML: "server:\n  listen: \"127.0.0.1:0\"\n  trusted_proxies: [198.51.100.0/24]\n")
        _ = harness.send("GET", "/api/v1/attestation/challenge",
                         headers: Self.headers + [("X-Forwarded-For", "203.0.113.9, 198.51.100.20")])
        _ = harness.send("GET", "/api/v1/attestation/challenge", headers: Self.headers)
        // An IPv4-mapped entry is the IPv4 client its bucket is keyed by (stop 36's sweep: the
        // log said `::ffff:9.9.9.9` where the bucket said `9.9.9.9`).
        _ = harness.send("GET", "/api/v1/attestation/challenge", headers: Self.headers + [("X-Forwarded-For", "::ffff:9.9.9.9")])
        let untrusted = try RouterHarness()
        _ = untrusted.send("GET", "/api/v1/attestation/challenge", headers: Self.headers + [("X-Forwarded-For", "203.0.113.9")])
        #expect(harness.accessLog.lines.count == 3 && untrusted.accessLog.lines.count == 1)
        #expect(harness.accessLog.lines.first?.contains(#""client":"203.0.113.9""#) == true, "\(harness.accessLog.lines)")
        #expect(harness.accessLog.lines.dropFirst().first?.contains(#""client":"198.51.100.7""#) == true, "no header: the proxy itself")
        #expect(harness.accessLog.lines.last?.contains(#""client":"9.9.9.9""#) == true, "\(harness.accessLog.lines)")
        #expect(untrusted.accessLog.lines.first?.contains(#""client":"198.51.100.7""#) == true, "an untrusted peer's header is ignored")
    }

    @Test("tenant headers", arguments: [
        ([(String, String)](), 400, "bad_request"), ([("X-Team-ID", "NOPE123456"), ("X-Bundle-ID", "x")], 401, "unknown_tenant"),
    ])
    func tenantResolution(headers: [(String, String)], status: Int, code: String) throws {
        let harness = try RouterHarness()
        for (method, path) in [("GET", "/api/v1/attestation/challenge"), ("POST", "/api/v1/attestation/refresh"),
                               ("POST", "/api/v1/attestation/validate")] {
            let response = harness.send(method, path, headers: headers, body: Array("{}".utf8))
            #expect(response.status == status, "\(path)")
            #expect(response.code == code, "\(path)")
        }
        #expect(harness.devices.writes == 0 && harness.challenges.issued == 0)
    }

    @Test func challengeAnswersWithTheStoresIssueTime() throws {
        let harness = try RouterHarness()
        harness.challenges.reply = .success(IssuedChallenge(challenge: "ab12", issuedAtMilliseconds: 1_800_000_000_000))
        let response = harness.send("GET", "/api/v1/attestation/challenge", headers: RouterHarness.tenantHeaders)
        #expect(response.status == 200)
        #expect(response.json["challenge"] as? String == "ab12")
        #expect(response.json["expiresAt"] as? String == "2027-01-15T08:05:00Z")
        #expect(response.json["ttl"] as? Int == 300)
        #expect(harness.challenges.checked.first?.map(\.name) == ["challenge", "ip-challenge"])
        #expect(harness.limiter.checked.isEmpty, "the store takes the challenge buckets, no separate round trip")
        harness.challenges.reply = .failure(StoreFailure(description: "down"))
        let failed = harness.send("GET", "/api/v1/attestation/challenge", headers: RouterHarness.tenantHeaders)
        #expect(failed.status == 503)
        #expect(failed.code == "store_unavailable")
    }

    @Test func challengeRateLimitOnTheControlledClock() throws {
        let harness = try RouterHarness(tier: "two", gatewayYAML: "tiers:\n  two: { attest: 2, challenge: 2, api: 2, mad_limit: 10 }\n")
        let statuses = (0..<3).map { _ in harness.send("GET", "/api/v1/attestation/challenge", headers: RouterHarness.tenantHeaders).status }
        #expect(statuses == [200, 200, 429])
        harness.time.advance(.seconds(30))
        #expect(harness.send("GET", "/api/v1/attestation/challenge", headers: RouterHarness.tenantHeaders).status == 200)
        #expect(harness.challenges.issued == 3)
    }

    @Test("validate: malformed bodies never reach the store", arguments: [
        (#"{"keyId":"AAAA","attestationObject":"AAAA","challenge":"c","clientDataHash":"AAAA"}"#, "key_id_invalid"),
        (#"{"keyId":"\#(Data(count: 32).base64EncodedString())","attestationObject":"!!","challenge":"c","clientDataHash":"AAAA"}"#,
         "attestation_object_invalid"),
    ])
    func malformedValidate(body: String, code: String) throws {
        let harness = try RouterHarness()
        let response = harness.send("POST", "/api/v1/attestation/validate", headers: Self.headers, body: Array(body.utf8))
        #expect(response.status == 400)
        #expect(response.code == code)
        #expect(harness.devices.writes == 0)
        #expect(harness.limiter.checked.isEmpty)
    }
}
