import AGCrypto
import AGPolicy
import AGTestSupport
import Foundation
import Testing

@Suite("rate limits and runtime tiers, end to end")
struct RateLimitEndToEndTests {
    let teamID = TestGateway.randomTeamID()
    var appID: String { "\(teamID).com.example.app" }
    var headers: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")] }

    func challengeKeys(_ gateway: TestGateway) throws -> Int {
        Int(try RedisCLI.run(gateway.redisURL, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "ag:{\(appID)}:ch:*")) ?? -1
    }

    @Test func headersCountDownThen429WithRetryAfter() throws {
        // A whole second, so every reset below is an exact number of seconds away.
        let time = ManualTime(microseconds: 1_800_000_000_000_000)
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: "five")], gatewayYAML: """
            tiers:
              five: { attest: 5, challenge: 5, api: 5, mad_limit: 10 }
            """, time: time)
        defer { gateway.stop() }
        let client = try HTTPTestClient(port: gateway.port)
        let started = 1_800_000_000
        for expected in (0..<5).reversed() {
            let response = try client.request("GET", "/api/v1/attestation/challenge", headers: headers)
            #expect(response.status == 200)
            #expect(response.header("X-RateLimit-Limit") == "5")
            #expect(response.header("X-RateLimit-Remaining") == String(expected))
            // One token per 12 s: full again (5 - expected) × 12 s from now.
            #expect(response.header("X-RateLimit-Reset") == String(started + (5 - expected) * 12))
            #expect(response.header("Retry-After") == nil)
        }
        let limited = try client.request("GET", "/api/v1/attestation/challenge", headers: headers)
        #expect(limited.status == 429)
        #expect(limited.code == "rate_limited")
        #expect(limited.header("X-RateLimit-Remaining") == "0")
        #expect(limited.header("Retry-After") == "12")
        #expect(try challengeKeys(gateway) == 5, "a rate-limited request stores no challenge")
        // Five seconds later the token is five seconds closer; twelve seconds after the burst it is back.
        time.advance(.seconds(5))
        #expect(try client.request("GET", "/api/v1/attestation/challenge", headers: headers).header("Retry-After") == "7")
        time.advance(.seconds(7))
        #expect(try client.request("GET", "/api/v1/attestation/challenge", headers: headers).status == 200)
    }

    /// Own Redis: every test's requests come from 127.0.0.1, so IP buckets are shared otherwise.
    @Test func perIPChallengeLimit() async throws {
        try await RedisServer.withPrivate { redis in try perIPChallengeLimit(redisURL: "redis://127.0.0.1:\(redis.port)/0") }
    }

    func perIPChallengeLimit(redisURL: String) throws {
        let gateway = try TestGateway(redisURL: redisURL, tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], gatewayYAML: """
            ip_limits:
              challenge: 3
              validate: 3
            """)
        defer { gateway.stop() }
        let statuses = try (0..<4).map { _ in try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).status }
        #expect(statuses == [200, 200, 200, 429])
        // Refresh has no IP limit: it is not refused by the exhausted IP bucket.
        let refresh = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: Array("{}".utf8))
        #expect(refresh.code == "bad_request")
    }

    /// The challenge's tenant bucket is taken inside its issuing script, the IP bucket beside
    /// it: a challenge the IP bucket refuses gives the tenant its token back and leaves no
    /// challenge stored. Own Redis (IP buckets), and a clock that stands still (no refill).
    @Test func anIPRefusedChallengeTakesNoTenantTokenAndStoresNothing() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: "five")], gatewayYAML: """
                tiers:
                  five: { attest: 5, challenge: 5, api: 5, mad_limit: 10 }
                ip_limits:
                  challenge: 2
                  validate: 2
                """, time: ManualTime(microseconds: 1_800_000_000_000_000))
            defer { gateway.stop() }
            let responses = try (0..<3).map { _ in try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers) }
            #expect(responses.map(\.status) == [200, 200, 429])
            #expect(responses[2].code == "rate_limited")
            #expect(responses[2].header("X-RateLimit-Limit") == "2", "the IP bucket refused")
            #expect(responses[2].header("Retry-After") == "30")
            #expect(responses[1].header("X-RateLimit-Remaining") == "0", "the tightest bucket's count: the IP's")
            let tokens = { try RedisCLI.run(gateway.redisURL, "HGET", "ag:{\(appID)}:rl:challenge", "tokens") }
            // 5 tokens, 2 kept by the issued challenges: 3 × 60,000,000 units.
            #expect(try eventually { try tokens() == "180000000" }, "tenant units: \((try? tokens()) ?? "?")")
            #expect(try challengeKeys(gateway) == 2, "the refused request's challenge was withdrawn")
        }
    }

    /// A well-formed refresh for `challenge` from a made-up device.
    func refreshBody(challenge: String) -> [UInt8] {
        let hash = Data(SHA256.hash(Array(challenge.utf8))).base64EncodedString()
        return Array(#"{"keyId":"\#(Data(repeating: 7, count: 32).base64EncodedString())","assertion":"AAAA","clientDataHash":"\#(hash)","challenge":"\#(challenge)"}"#.utf8)
    }

    @Test func aRateLimitedRefreshChangesNoState() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: "one")], gatewayYAML: """
            tiers:
              one: { attest: 1, challenge: 100, api: 100, mad_limit: 10 }
            """)
        defer { gateway.stop() }
        // Malformed: refused before Redis, takes no token, carries no rate-limit headers.
        let malformed = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: Array("{}".utf8))
        #expect(malformed.code == "bad_request")
        #expect(malformed.header("X-RateLimit-Limit") == nil)
        // Well-formed: takes the only attest token (and then finds no such device).
        let first = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: refreshBody(challenge: "c0"))
        #expect(first.code == "not_found")
        #expect(first.header("X-RateLimit-Remaining") == "0")
        try gateway.putChallenge(appID: appID, challenge: "c1")
        let limited = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: refreshBody(challenge: "c1"))
        #expect(limited.status == 429)
        #expect(limited.code == "rate_limited")
        #expect(limited.header("X-RateLimit-Limit") == "1")
        #expect(limited.header("Retry-After") == "60")
        #expect(try gateway.challengeState(appID: appID, challenge: "c1").hasPrefix("used:") == false)
    }

    @Test func aBurstAcrossTwoInstancesIsCutAtTheLimit() async throws {
        let tier = "burst-\(teamID.lowercased())"
        let yaml = "tiers:\n  \(tier): { attest: 40, challenge: 40, api: 40, mad_limit: 10 }\n"
        let tenant = ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: tier)]
        // Both instances read one clock that stands still: nothing refills during the burst.
        let time = ManualTime()
        let a = try TestGateway(tenants: tenant, gatewayYAML: yaml, time: time)
        let b = try TestGateway(tenants: tenant, gatewayYAML: yaml, time: time)
        defer { a.stop(); b.stop() }
        let ports = [a.port, b.port]
        let requestHeaders = headers
        let allowed = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let client = try HTTPTestClient(port: ports[worker % 2])
                    var ok = 0
                    for _ in 0..<15 where try client.request("GET", "/api/v1/attestation/challenge", headers: requestHeaders).status == 200 {
                        ok += 1
                    }
                    return ok
                }
            }
            return try await group.reduce(0, +)
        }
        // 120 requests, 40 tokens.
        #expect(allowed == 40, "allowed \(allowed)")
    }

    @Test func aTierChangeOnOneInstanceIsEnforcedByAnotherAndSurvivesRestartAndReload() throws {
        let tenant = ["a.yaml": TestGateway.tenantYAML(teamID: teamID)]
        let a = try TestGateway(tenants: tenant)
        let b = try TestGateway(tenants: tenant)
        defer { a.stop(); b.stop() }
        #expect(try b.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "1000000")

        let changed = try a.admin("PUT", "/admin/v1/tenants/\(appID)/tier", json: #"{"tier":"free"}"#)
        #expect(changed.status == 200)
        #expect(changed.json["tier"] as? String == "free")
        #expect(changed.json["tierOverride"] as? String == "free")
        let started = Date()
        #expect(try eventually(1.5) { try b.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "60" })
        #expect(Date().timeIntervalSince(started) < 1.5)

        #expect(try b.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try b.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "60", "reload keeps overrides")

        b.stop()
        let c = try TestGateway(tenants: tenant)
        defer { c.stop() }
        #expect(try eventually(2) { try c.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "60" },
                "a restarted instance reads the override from Redis")
        let shown = try c.admin("GET", "/admin/v1/tenants/\(appID)")
        #expect(shown.json["tier"] as? String == "free")
        #expect(shown.json["fileTier"] as? String == "test")

        #expect(try a.admin("DELETE", "/admin/v1/tenants/\(appID)/tier").status == 200)
        #expect(try eventually(1.5) { try c.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "1000000" })
    }

    @Test func tierNumbersChangeAtRuntime() throws {
        let tier = "rt-\(teamID.lowercased())"
        let a = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { a.stop() }
        let incomplete = try a.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"attest": 5}"#)
        #expect(incomplete.status == 400)
        #expect(incomplete.code == "bad_request")
        let invalid = try a.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"attest": -1, "challenge": 1, "api": 1, "mad_limit": 1}"#)
        #expect(invalid.code == "bad_request")
        let created = try a.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"attest": 7, "challenge": 9, "api": 11, "mad_limit": "unlimited"}"#)
        #expect(created.status == 200)
        let unknown = try a.admin("PUT", "/admin/v1/tenants/\(appID)/tier", json: #"{"tier":"no-such-tier"}"#)
        #expect(unknown.status == 404)
        #expect(unknown.code == "not_found")
        // A misspelt extra member is refused, not dropped (stop 32, independent sweep).
        let extra = try a.admin("PUT", "/admin/v1/tenants/\(appID)/tier", json: #"{"tier":"\#(tier)","tire":"x"}"#)
        #expect(extra.status == 400)
        #expect(extra.code == "bad_request")
        #expect(try a.admin("PUT", "/admin/v1/tenants/\(appID)/tier", json: #"{"tier":"\#(tier)"}"#).status == 200)
        #expect(try a.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "9")
        let tiers = try a.admin("GET", "/admin/v1/tiers")
        #expect(((tiers.json["tiers"] as? [String: Any])?[tier] as? [String: Any])?["api"] as? Int == 11)
        #expect((((tiers.json["tiers"] as? [String: Any])?[tier] as? [String: Any])?["runtime"] as? [String: Any])?["api"] as? Int == 11,
                "the runtime numbers are shown as such")
        let list = try a.admin("GET", "/admin/v1/tenants")
        #expect((list.json["tenants"] as? [[String: Any]])?.first?["appId"] as? String == appID)

        // Runtime numbers can be removed (stop 32: there was no way but Redis by hand). A tier
        // only the runtime defined is gone then, and its tenants are on their file tier again.
        let removed = try a.admin("DELETE", "/admin/v1/tiers/\(tier)")
        #expect(removed.status == 200)
        #expect(removed.json["removed"] as? Bool == true)
        #expect(removed.json["limits"] is NSNull)
        #expect(try a.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "1000000")
        #expect((try a.admin("GET", "/admin/v1/tiers").json["tiers"] as? [String: Any])?[tier] == nil)
        #expect(try RedisCLI.run(a.redisURL, "HEXISTS", "ag:{cfg}:tiers", tier) == "0")
        #expect(try a.admin("DELETE", "/admin/v1/tiers/\(tier)").json["removed"] as? Bool == false, "nothing left to remove")
        #expect(try a.admin("DELETE", "/admin/v1/tiers/Bad%20Name").code == "bad_request")
        #expect(try a.admin("DELETE", "/admin/v1/tenants/\(appID)/tier").status == 200)
    }

    /// A file tier gets a subset of its numbers by PUT; the next PUT replaces the earlier runtime
    /// numbers, so a number it leaves out is the file's again (README, admin API).
    @Test func aPartialTierPutReplacesTheEarlierRuntimeNumbers() throws {
        let tier = "ft-\(teamID.lowercased())"
        let a = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: tier)],
                                gatewayYAML: "tiers:\n  \(tier): { attest: 10, challenge: 20, api: 30, mad_limit: 40 }\n")
        defer { a.stop() }
        func numbers(_ response: TestResponse) -> [String: Int] {
            var out = [String: Int]()
            let limits = response.json["limits"] as? [String: Any] ?? [:]
            for name in ["attest", "challenge", "api", "mad_limit"] { out[name] = limits[name] as? Int }
            return out
        }
        let first = try a.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"challenge": 7}"#)
        #expect(first.status == 200)
        #expect(numbers(first) == ["attest": 10, "challenge": 7, "api": 30, "mad_limit": 40])
        #expect(try a.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "7")

        let second = try a.admin("PUT", "/admin/v1/tiers/\(tier)", json: #"{"api": 5}"#)
        #expect(second.status == 200)
        #expect(numbers(second) == ["attest": 10, "challenge": 20, "api": 5, "mad_limit": 40], "challenge is the file's again")
        #expect(try a.send("GET", "/api/v1/attestation/challenge", headers: headers).header("X-RateLimit-Limit") == "20")
    }

    /// Runtime numbers for part of a file tier that then leaves the file make no tier; they are
    /// listed apart, so that they can be seen and removed before the tier comes back and they
    /// apply again (stop 34, independent admin sweep: they were invisible).
    @Test func runtimeNumbersOfATierGoneFromTheFileAreListedAndRemovable() throws {
        let spare = "spare-\(teamID.lowercased())"
        let kept = "kept-\(teamID.lowercased())"
        let a = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: kept)],
                                gatewayYAML: "tiers:\n  \(kept): { attest: 10, challenge: 20, api: 30, mad_limit: 40 }\n"
                                    + "  \(spare): { attest: 10, challenge: 20, api: 30, mad_limit: 40 }\n")
        defer { a.stop() }
        #expect(try a.admin("PUT", "/admin/v1/tiers/\(spare)", json: #"{"api": 5}"#).status == 200)
        #expect((try a.admin("GET", "/admin/v1/tiers").json["runtimeWithoutTier"] as? [String: Any])?[spare] == nil)
        let path = a.directory + "/gateway.yaml"
        let yaml = try TestFile.text(path)
        try yaml.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains(spare) }.joined(separator: "\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try a.admin("POST", "/admin/v1/reload").status == 200)
        let listed = try a.admin("GET", "/admin/v1/tiers")
        #expect((listed.json["tiers"] as? [String: Any])?[spare] == nil)
        #expect(((listed.json["runtimeWithoutTier"] as? [String: Any])?[spare] as? [String: Any])?["api"] as? Int == 5, "\(listed.text)")
        // They make no tier a tenant can be moved to (the sweep of this stop's fixes: the
        // script took the leftover numbers for a tier and answered 200).
        let moved = try a.admin("PUT", "/admin/v1/tenants/\(teamID).com.example.app/tier", json: #"{"tier": "\#(spare)"}"#)
        #expect(moved.status == 404 && moved.code == "not_found", "\(moved.text)")
        // Nor do four numbers that are not all valid, written into Redis by hand (a tier this
        // instance would ignore as invalid; the sweep of this stop's fixes).
        let handWritten = "hand-\(teamID.lowercased())"
        _ = try RedisCLI.run(a.redisURL, "HSET", "ag:{cfg}:tiers", handWritten, #"{"attest":1,"challenge":2,"api":3,"mad_limit":null}"#)
        let invalid = try a.admin("PUT", "/admin/v1/tenants/\(teamID).com.example.app/tier", json: #"{"tier": "\#(handWritten)"}"#)
        #expect(invalid.status == 404 && invalid.code == "not_found", "\(invalid.text)")
        _ = try RedisCLI.run(a.redisURL, "HDEL", "ag:{cfg}:tiers", handWritten)
        let removed = try a.admin("DELETE", "/admin/v1/tiers/\(spare)")
        #expect(removed.status == 200 && removed.json["removed"] as? Bool == true)
        // (Other tests' runtime tiers share this Redis, and may be listed here too.)
        #expect((try a.admin("GET", "/admin/v1/tiers").json["runtimeWithoutTier"] as? [String: Any])?[spare] == nil)
    }
}
