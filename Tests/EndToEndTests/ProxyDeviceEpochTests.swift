import AGPolicy
import AGTestSupport
import Foundation
import Testing

/// Issue 11 item 3 with issue 9 item 2 at once: a proxied request with a token costs no Redis
/// command in the steady state, and still no revoked, deleted or lost device gets through once
/// one lease lifetime has passed — with no event delivered at all, since each check below is
/// made by a script run straight in Redis (nothing is appended to the events stream).
@Suite("proxy device epoch")
struct ProxyDeviceEpochTests {
    /// One lease lifetime and a margin: the staleness bound the README states.
    static let bound = Duration.microseconds(LeaseSizing.lifetimeMicroseconds) + .milliseconds(100)

    /// A fixture on its own Redis and clock, and a token of a device on record.
    struct Setup {
        let fixture: ProxyFixture
        let url: String
        let time: ManualTime
        let keyID: String
        let token: String

        init(redis: RedisServer, gatewayYAML: String = "") throws {
            url = "redis://127.0.0.1:\(redis.port)/0"
            time = ManualTime()
            fixture = try ProxyFixture(redisURL: url, gatewayYAML: gatewayYAML, time: time)
            let claims = fixture.claims()
            keyID = claims["sub"]!.stringValue!
            token = try fixture.sign(claims)
        }

        var deviceKey: String { "ag:{\(fixture.appID)}:dev:\(keyID)" }
        var epochKey: String { "ag:{\(fixture.appID)}:devepoch" }

        /// Runs `script` in Redis as the gateway would, with now and a seed where it takes them.
        func run(_ script: String, keys: [String], args: [String]) throws -> String {
            try RedisCLI.run(url, ["EVAL", script, String(keys.count)] + keys + [String(time.nowMicroseconds)] + args)
        }

        /// Every script call Redis has run so far.
        func scriptCalls() throws -> Int {
            try RedisCLI.run(url, "INFO", "commandstats").split(whereSeparator: \.isNewline)
                .filter { $0.hasPrefix("cmdstat_evalsha:") || $0.hasPrefix("cmdstat_eval:") }
                .compactMap { Int($0.split(separator: "=")[1].split(separator: ",")[0]) }.reduce(0, +)
        }
    }

    @Test func steadyStateProxiedRequestsWithATokenCostNoRedisCommand() async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis)
            defer { setup.fixture.stop() }
            let connection = try HTTPTestClient(port: setup.fixture.gateway.port)
            let headers = setup.fixture.tenantHeaders + [("Authorization", "Bearer \(setup.token)")]
            // Warm both workers' token caches, device checks and leases.
            for _ in 0..<20 { #expect(try setup.fixture.get("/api/warm", token: setup.token).status == 200) }
            let before = try setup.scriptCalls()
            for _ in 0..<200 { #expect(try connection.request("GET", "/api/x", headers: headers).status == 200) }
            let calls = try setup.scriptCalls() - before
            // One lease per 64 requests and worker, plus the control loop's own periodic reads.
            #expect(calls < 20, "\(calls) script calls for 200 proxied requests")
        }
    }

    @Test func aQuietTenantsCachedTokenCostsOnlyTheLeaseOnceItLapsed() async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis)
            defer { setup.fixture.stop() }
            let connection = try HTTPTestClient(port: setup.fixture.gateway.port)
            let headers = setup.fixture.tenantHeaders + [("Authorization", "Bearer \(setup.token)")]
            for _ in 0..<4 { #expect(try connection.request("GET", "/api/warm", headers: headers).status == 200) }
            let before = try setup.scriptCalls()
            // One request per lease lifetime: each finds its lease lapsed. The lease call reads
            // the epoch again, unchanged, so the device record is not read (that would be two
            // calls per request).
            for _ in 0..<10 {
                setup.time.advance(Self.bound)
                #expect(try connection.request("GET", "/api/x", headers: headers).status == 200)
            }
            let calls = try setup.scriptCalls() - before
            #expect(calls >= 10 && calls <= 14, "\(calls) script calls for 10 requests a lease lifetime apart")
        }
    }

    @Test func aRevocationNoEventAnnouncedIsRefusedWithinOneLeaseLifetime() async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis)
            defer { setup.fixture.stop() }
            for _ in 0..<4 { #expect(try setup.fixture.get("/api/warm", token: setup.token).status == 200) }
            let epoch = try RedisCLI.run(setup.url, "GET", setup.epochKey)
            #expect(Int64(epoch) != nil, "the lease script created the tenant's epoch")
            #expect(try setup.run(DeviceScripts.revoke.source, keys: [setup.deviceKey, setup.epochKey], args: ["1"]) == "1")
            #expect(try RedisCLI.run(setup.url, "GET", setup.epochKey) == String(Int64(epoch)! + 1), "the revocation moved it")
            setup.time.advance(Self.bound)
            for _ in 0..<4 {
                let refused = try setup.fixture.get("/api/after", token: setup.token)
                #expect(refused.status == 403)
                #expect(refused.code == "forbidden")
            }
            #expect(!setup.fixture.upstream.records.contains { $0.target.hasSuffix("/api/after") })
        }
    }

    @Test func aDeletedDeviceIsRefused() async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis)
            defer { setup.fixture.stop() }
            for _ in 0..<4 { #expect(try setup.fixture.get("/api/warm", token: setup.token).status == 200) }
            // The refresh's invalidation (an assertion the stored key signed, refused): the record goes.
            let pk = try RedisCLI.run(setup.url, "HGET", setup.deviceKey, "pk")
            let counter = try RedisCLI.run(setup.url, "HGET", setup.deviceKey, "ctr")
            #expect(try setup.run(DeviceScripts.invalidate.source, keys: [setup.deviceKey, setup.epochKey],
                                  args: [pk, "1", counter.isEmpty ? "0" : counter]) == "1")
            setup.time.advance(Self.bound)
            let refused = try setup.fixture.get("/api/after", token: setup.token)
            #expect(refused.status == 403)
            #expect(refused.code == "forbidden")
            #expect(try setup.fixture.metric("attestgate_proxy_refused_devices_total{reason=\"unknown\"}") >= 1)
        }
    }

    @Test func aRedisRestartedEmptyRefusesCachedTokensAfterTheNextLease() async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis)
            defer { setup.fixture.stop() }
            for _ in 0..<4 { #expect(try setup.fixture.get("/api/warm", token: setup.token).status == 200) }
            try RedisCLI.run(setup.url, "FLUSHALL")
            setup.time.advance(Self.bound)
            for _ in 0..<4 {
                let refused = try setup.fixture.get("/api/after", token: setup.token)
                #expect(refused.status == 403)
                #expect(refused.code == "forbidden")
            }
            #expect(!setup.fixture.upstream.records.contains { $0.target.hasSuffix("/api/after") })
        }
    }

    /// Under `allow`, a gateway started after a revocation refuses the revoked device's token
    /// while Redis is down as well: it read the revocation from the events stream's history when
    /// it started (an independent sweep saw an instance restarted after the revocation proxy the
    /// token once Redis went away, having answered 403 while it was up).
    @Test func aGatewayStartedAfterARevocationRefusesItUnderAllowWhileRedisIsDown() async throws {
        try await RedisServer.withPrivate { redis in
            let allow = "proxy:\n  unverified_token_policy: allow\n"
            let setup = try Setup(redis: redis, gatewayYAML: allow)
            let pathKeyID = setup.keyID.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            let revoked = try setup.fixture.gateway.admin("POST", "/admin/v1/tenants/\(setup.fixture.appID)/keys/\(pathKeyID)/revoke")
            #expect(revoked.status == 200, "\(revoked.text)")
            setup.fixture.gateway.stop()
            // Another instance of the same configuration, started after the revocation.
            let later = try TestGateway(sameConfigAs: setup.fixture.gateway, name: "later")
            defer {
                later.stop()
                setup.fixture.upstream.stop()
            }
            func get(_ target: String) throws -> TestResponse {
                try later.send("GET", target, headers: setup.fixture.tenantHeaders + [("Authorization", "Bearer \(setup.token)")])
            }
            #expect(try get("/api/up").status == 403)
            // Each of its two workers has read the revocation from the stream's history.
            #expect(eventually(10) { later.logText().components(separatedBy: "revocation received").count - 1 >= 2 })
            redis.kill()
            setup.time.advance(Self.bound)
            for _ in 0..<4 {
                let refused = try get("/api/down")
                #expect(refused.status == 403)
                #expect(refused.code == "forbidden")
            }
            #expect(!setup.fixture.upstream.records.contains { $0.target.hasSuffix("/api/down") })
        }
    }

    @Test(arguments: ["deny", "allow"])
    func aTokenThatCannotBeCheckedFollowsThePolicy(policy: String) async throws {
        try await RedisServer.withPrivate { redis in
            let setup = try Setup(redis: redis, gatewayYAML: "proxy:\n  unverified_token_policy: \(policy)\n")
            defer { setup.fixture.stop() }
            for _ in 0..<4 { #expect(try setup.fixture.get("/api/warm", token: setup.token).status == 200) }
            redis.kill()
            // Past the bound the epoch this worker read is no longer current: the token is unchecked.
            setup.time.advance(Self.bound)
            let response = try setup.fixture.get("/api/down", token: setup.token)
            if policy == "deny" {
                #expect(response.status == 503)
                #expect(response.code == "store_unavailable")
                #expect(!setup.fixture.upstream.records.contains { $0.target.hasSuffix("/api/down") })
            } else {
                #expect(response.status == 200)
            }
        }
    }
}
