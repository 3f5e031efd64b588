import AGDevice
import AGFormats
import AGPlatformSSO
import AGPolicy
import AGRedis
import AGTestSupport
import Foundation
import Testing

/// The gateway on each deployment form of `redis.url` (the shared cluster and Sentinel set of
/// scripts/test): registration, refresh, proxying, a revocation and a tier change seen by a
/// second instance; and `redis.wait_replicas` both ways.
@Suite struct GatewayTopologyTests {
    static func clusterURL() async throws -> String { try await RedisCluster.withShared { $0.description } }
    static func sentinelURL() async throws -> String { try await RedisSentinelSet.withShared { $0.description } }
    /// Under a sanitizer on the loaded 2-core machine, script calls through the cluster's
    /// per-primary connections outran the usual 250 ms deadline (503 store_unavailable on an
    /// admin PUT, in both tests below): what these tests check is each topology's flow, not
    /// the deadline (RedisFailureTests and StoreOutageOperationsTests do, with their own).
    static let redisTimeout = TestBuild.sanitizer == nil ? "250ms" : "2s"

    @Test(arguments: ["cluster", "sentinel"])
    func theWholeFlowRunsOn(_ topology: String) async throws {
        let url = topology == "cluster" ? try await Self.clusterURL() : try await Self.sentinelURL()
        try await onThread {
            // A revocation reaches every worker within one lease lifetime (or at once through
            // the events stream): the shared clock is moved past that bound after it.
            let time = ManualTime()
            let first = try ProxyFixture(redisURL: url, redisTimeout: Self.redisTimeout, time: time)
            defer { first.stop() }
            let second = try ProxyFixture(teamID: first.teamID, redisURL: url, upstream: first.upstream,
                                          redisTimeout: Self.redisTimeout, time: time)
            defer { second.gateway.stop() }
            try FileManager.default.removeItem(atPath: second.gateway.directory + "/keys/test-es256.pem")
            try FileManager.default.copyItem(atPath: first.gateway.directory + "/keys/test-es256.pem",
                                             toPath: second.gateway.directory + "/keys/test-es256.pem")
            #expect(try second.gateway.admin("POST", "/admin/v1/reload").status == 200)

            let (token, device) = try first.deviceToken()
            #expect(try first.get("/api/x", token: token).status == 200)
            #expect(try second.get("/api/x", token: token).status == 200)
            #expect(try first.gateway.admin("POST", "/admin/v1/tenants/\(first.appID)/keys/\(device.keyIDForPath)/revoke").status == 200)
            time.advance(.microseconds(LeaseSizing.lifetimeMicroseconds) + .milliseconds(100))
            for instance in [first, second] {
                let refused = try instance.get("/api/x", token: token)
                #expect(refused.status == 403)
                #expect(refused.code == "forbidden")
            }
            // A tier change through one instance reaches the other through the events stream.
            let tier = try first.gateway.admin("PUT", "/admin/v1/tenants/\(first.appID)/tier", json: #"{"tier":"pro"}"#)
            #expect(tier.status == 200, "\(tier.text)")
            #expect(eventually(5) {
                (try? second.gateway.admin("GET", "/admin/v1/tenants/\(first.appID)"))?.text.contains(#""tier":"pro""#) == true
            })
            _ = try first.gateway.admin("DELETE", "/admin/v1/tenants/\(first.appID)/tier")
            #expect(try first.gateway.send("GET", "/readyz").status == 200)
        }
    }

    /// Platform SSO's scripts on each topology: register, mint, two rotations, the reuse of a
    /// rotated token revoking its family, and an admin revoke.
    @Test(arguments: ["cluster", "sentinel"])
    func platformSSORunsOn(_ topology: String) async throws {
        let url = topology == "cluster" ? try await Self.clusterURL() : try await Self.sentinelURL()
        try await onThread {
            let sso = try PlatformSSOGateway(redisURL: url, redisTimeout: Self.redisTimeout)
            defer { sso.stop() }
            let (mac, first) = try sso.enrolledMac()
            let second = try sso.rotate(mac, token: first)
            let third = try sso.rotate(mac, token: second)
            let (reused, _) = try sso.refresh(mac, token: first)
            #expect(reused.status == 401 && reused.oauthError == "invalid_grant")
            let (afterReuse, _) = try sso.refresh(mac, token: third)
            #expect(afterReuse.status == 401 && afterReuse.oauthError == "invalid_grant", "the family is revoked")
            let fresh = try sso.mint(mac)
            let revoked = try sso.gateway.admin("POST", "\(sso.devicesPath)/\(mac.keyID.urlSafe)/revoke")
            #expect(revoked.status == 200)
            let (disabled, _) = try sso.refresh(mac, token: fresh)
            #expect(disabled.status == 401 && disabled.json["error_description"] as? String == "device disabled")
        }
    }

    @Test func commitsWaitForTheConfiguredReplicas() async throws {
        let sentinel = try await Self.sentinelURL()
        try await onThread {
            // The Sentinel set's primary has two replicas: WAIT 2 is met.
            // (Under a sanitizer the replicas' acknowledgment outran the default WAIT deadline on
            // the loaded machine: 2 s there, as for `redisTimeout`.)
            let slow = TestBuild.sanitizer != nil
            let replicated = try ProxyFixture(redisURL: sentinel, gatewayYAML: "redis:\n  url: \(sentinel)\n  timeout: \(slow ? "2s" : "500ms")\n"
                                                + "  wait_replicas: 2\n" + (slow ? "  wait_timeout: 1s\n" : ""))
            defer { replicated.stop() }
            #expect(try replicated.deviceToken().token.isEmpty == false)
            // The single test server has none: every commit stays unconfirmed and is refused.
            let single = TestGateway.sharedRedisURL
            let alone = try ProxyFixture(redisURL: single, gatewayYAML: "redis:\n  url: \(single)\n  timeout: 500ms\n  wait_replicas: 1\n  wait_timeout: 50ms\n")
            defer { alone.stop() }
            do {
                _ = try alone.deviceToken()
                Issue.record("a refresh was accepted without the replica it must wait for")
            } catch let error as DeviceError {
                #expect(error.status == 503)
                #expect(error.code == "store_unavailable")
            }
        }
    }
}

/// Runs blocking test code (sockets, sleeps) on a thread of its own, off the cooperative pool.
func onThread<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
