import AGPolicy
import AGTestSupport
import Foundation
import Testing

/// The tenant `api` bucket on proxied calls, with Redis up and down.
@Suite("proxy rate limiting")
struct ProxyRateLimitTests {
    static let threePerMinute = """
        tiers:
          three: { attest: 3, challenge: 3, api: 3, mad_limit: 10 }
        """

    @Test func proxiedCallsDrawFromTheApiBucket() throws {
        let fixture = try ProxyFixture(tier: "three", gatewayYAML: Self.threePerMinute)
        defer { fixture.stop() }
        for remaining in ["2", "1", "0"] {
            let response = try fixture.gateway.send("GET", "/public/ping", headers: fixture.tenantHeaders)
            #expect(response.status == 200)
            #expect(response.header("X-RateLimit-Limit") == "3")
            #expect(response.header("X-RateLimit-Remaining") == remaining)
        }
        let limited = try fixture.gateway.send("GET", "/public/ping", headers: fixture.tenantHeaders)
        #expect(limited.status == 429)
        #expect(limited.code == "rate_limited")
        #expect(limited.header("Retry-After") != nil)
        #expect(fixture.upstream.records.count == 3, "a limited call never reaches the upstream")
    }

    /// Leased tokens are taken from the shared bucket before they are spent, so two instances of
    /// two workers each never admit more than the bucket holds; what they may leave unspent is
    /// at most instances × workers × batch (here 2 × 2 × 10: 600 per minute leases ≤ 10).
    @Test func leasesAcrossTwoInstancesNeverAdmitMoreThanTheBucket() async throws {
        let tier = "tiers:\n  lease: { attest: 600, challenge: 600, api: 600, mad_limit: 10 }\n"
        let time = ManualTime()
        let teamID = TestGateway.randomTeamID()
        let a = try ProxyFixture(teamID: teamID, tier: "lease", gatewayYAML: tier, time: time)
        let b = try ProxyFixture(teamID: teamID, upstream: a.upstream, tier: "lease", gatewayYAML: tier, time: time)
        defer { a.stop(); b.stop() }
        let ports = [a.gateway.port, b.gateway.port]
        let headers = a.tenantHeaders
        let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
            for client in 0..<8 {
                group.addTask {
                    let connection = try HTTPTestClient(port: ports[client % 2])
                    return try (0..<150).map { _ in try connection.request("GET", "/public/ping", headers: headers).status }
                }
            }
            return try await group.reduce([], +)
        }
        let admitted = statuses.filter { $0 == 200 }.count
        #expect(admitted <= 600, "admitted \(admitted)")
        #expect(admitted >= 600 - 2 * 2 * 10, "admitted \(admitted)")
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 429 })
        #expect(a.upstream.records.count == admitted)
    }

    @Test(arguments: ["local", "allow", "deny"])
    func withRedisDownTheConfiguredPolicyApplies(policy: String) async throws {
        try await RedisServer.withPrivate { redis in
            let fixture = try ProxyFixture(redisURL: "redis://127.0.0.1:\(redis.port)/0", tier: "three",
                                           gatewayYAML: Self.threePerMinute + "\nrate_limits:\n  on_store_error: \(policy)\n", workers: 1)
            defer { fixture.stop() }
            redis.kill()
            let responses = try (0..<5).map { _ in try fixture.gateway.send("GET", "/public/ping", headers: fixture.tenantHeaders) }
            switch policy {
            case "local":
                #expect(responses.map(\.status) == [200, 200, 200, 429, 429], "an in-process bucket keeps the limit")
                #expect(responses[0].header("X-RateLimit-Limit") == "3")
                #expect(responses[3].code == "rate_limited")
            case "allow":
                #expect(responses.allSatisfy { $0.status == 200 })
            default:
                #expect(responses.allSatisfy { $0.status == 503 && $0.code == "store_unavailable" })
            }
            #expect(try eventually { fixture.gateway.logText().components(separatedBy: "rate limiter lost redis").count == 2 },
                    "the switch is logged")
            let metrics = try fixture.gateway.admin("GET", "/metrics")
            #expect(metrics.text.contains("attestgate_ratelimit_mode_switches_total{mode=\"fallback\"} 1"))
        }
    }
}
