import AGRedis
import AGTestSupport
import Foundation
import Synchronization
import Testing
@testable import AGConfig
@testable import AGPolicy
@testable import AGGateway

/// `RateLimiter` outcomes, headers, and what it does while Redis is gone and after it returns.
@Suite("RateLimiter")
struct RateLimiterTests {
    private static func apiCheck(limit: Int) -> BucketCheck {
        .tenant(appID: "T\(UUID().uuidString.prefix(8)).com.example.app", .api, limitPerMinute: limit)
    }

    private static func temporaryLogPath() -> String {
        NSTemporaryDirectory() + "ratelimiter-\(UUID().uuidString).log"
    }

    private static func lines(in path: String, containing text: String) -> Int {
        let log = TestFile.textIfReadable(path)
        return log.split(separator: "\n").filter { $0.contains(text) }.count
    }

    @Test func fallbackPoliciesWhileRedisIsDownAndBackAfterwards() async throws {
        let logPath = Self.temporaryLogPath()
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        try await RedisServer.withPrivate { redis in
            try await RateLimitTestInstance.with(redis.url, logPath: logPath) { instance in
                let check = Self.apiCheck(limit: 3)
                guard case .allowed(let first?) = await instance.check([check], fallback: .local) else {
                    Issue.record("first check with Redis up was not allowed with a decision")
                    return
                }
                #expect(first.decision.remaining == 2)
                #expect(await instance.mode == .redis)

                redis.kill()
                var disconnected = false
                for _ in 0..<100 where !disconnected {
                    disconnected = await !instance.isConnected
                    if !disconnected { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(disconnected)

                // `local`: this instance's own bucket enforces the limit, starting full.
                let local = await instance.burst(4, [check], fallback: .local)
                #expect(local.prefix(3).allSatisfy { if case .allowed(_?) = $0 { true } else { false } })
                #expect(local.prefix(3).map { Dictionary(uniqueKeysWithValues: $0.headers)["X-RateLimit-Remaining"] } == ["2", "1", "0"])
                guard case .limited(let refused) = local[3] else {
                    Issue.record("fourth local check was \(local[3])")
                    return
                }
                #expect(refused.decision.retryAfter == 20)
                #expect(Dictionary(uniqueKeysWithValues: local[3].headers)["Retry-After"] == "20")

                // `allow` lets everything through with no headers; `refuse` refuses.
                let allowed = await instance.check([check], fallback: .allow)
                #expect(allowed == .allowed(nil))
                #expect(allowed.headers.isEmpty)
                #expect(await instance.check([check], fallback: .refuse) == .storeUnavailable)
                #expect(RateLimitOutcome.storeUnavailable.headers.isEmpty)
                #expect(await instance.mode == .fallback)
                #expect(await instance.modeChanges == [.fallback])
                #expect(Self.lines(in: logPath, containing: "rate limiter lost redis") == 1)

                // Back on Redis (an empty one: the bucket starts full again) as soon as it answers.
                try await redis.restart()
                var back: RateLimitOutcome?
                for _ in 0..<100 {
                    let outcome = await instance.check([check], fallback: .refuse)
                    if outcome != .storeUnavailable {
                        back = outcome
                        break
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                guard case .allowed(let fromRedis?) = back else {
                    Issue.record("no Redis decision after restart: \(String(describing: back))")
                    return
                }
                #expect(fromRedis.decision.remaining == 2)
                #expect(await instance.mode == .redis)
                #expect(await instance.modeChanges == [.fallback, .redis])
                #expect(Self.lines(in: logPath, containing: "rate limiter lost redis") == 1)
                #expect(Self.lines(in: logPath, containing: "rate limiter back on redis") == 1)
            }
        }
    }

    @Test func localBucketsAreSharedByTheWorkersOfAnInstance() async throws {
        // A port where nothing listens: the server is gone before either instance connects.
        let redis = try await RedisServer.start()
        redis.stop()
        let time = ManualTime()
        let shared = LocalBuckets(time: time)
        try await RateLimitTestInstance.with(redis.url, time: time, localBuckets: shared) { a in
            try await RateLimitTestInstance.with(redis.url, time: time, localBuckets: shared) { b in
                let check = Self.apiCheck(limit: 10)
                async let fromA = a.burst(10, [check], fallback: .local)
                async let fromB = b.burst(10, [check], fallback: .local)
                let outcomes = await fromA + fromB
                let allowed = outcomes.filter { if case .allowed = $0 { true } else { false } }.count
                // The clock stands still: no refill between the two bursts.
                #expect(allowed == 10)
                #expect(shared.count == 1)
            }
        }
    }

    @Test func localBucketsUseTheInjectedClockAndTakeAllOrNothing() {
        let time = ManualTime(microseconds: 0)
        let buckets = LocalBuckets(capacity: 10, time: time)
        let tenant = BucketCheck(key: "t", limitPerMinute: 60, name: "challenge")
        let ip = BucketCheck(key: "i", limitPerMinute: 1, name: "ip-challenge")
        #expect(buckets.take([tenant, ip]).allowed)
        let refused = buckets.take([tenant, ip])
        #expect(!refused.allowed)
        #expect(refused.decisions.map(\.remaining) == [59, 0])
        time.set(microseconds: 60_000_000)
        #expect(buckets.take([tenant, ip]).decisions.map(\.remaining) == [59, 0])
    }

    @Test func theMostRestrictiveBucketSetsTheHeaders() {
        let tenant = BucketCheck(key: "t", limitPerMinute: 100, name: "attest")
        let ip = BucketCheck(key: "i", limitPerMinute: 30, name: "ip-validate")
        let roomy = TokenBucket.Decision(allowed: true, limit: 100, remaining: 50, resetAt: 1_000, retryAfter: 0)
        let tight = TokenBucket.Decision(allowed: true, limit: 30, remaining: 5, resetAt: 900, retryAfter: 0)
        let allowed = RateLimitOutcome.combining([tenant, ip], allowed: true, [roomy, tight])
        #expect(allowed == .allowed(BucketDecision(check: ip, decision: tight)))
        #expect(allowed.headers.map(\.0) == ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"])
        #expect(allowed.headers.map(\.1) == ["30", "5", "900"])

        let empty = TokenBucket.Decision(allowed: false, limit: 100, remaining: 0, resetAt: 1_060, retryAfter: 1)
        let emptier = TokenBucket.Decision(allowed: false, limit: 30, remaining: 0, resetAt: 1_100, retryAfter: 2)
        let limited = RateLimitOutcome.combining([tenant, ip], allowed: false, [empty, emptier])
        #expect(limited == .limited(BucketDecision(check: ip, decision: emptier)))
        #expect(limited.headers.map(\.1) == ["30", "0", "1100", "2"])
        #expect(limited.headers.last?.0 == "Retry-After")

        // A bucket that had a token never speaks for a refusal.
        let refusedByTenant = RateLimitOutcome.combining([tenant, ip], allowed: false, [empty, tight])
        #expect(refusedByTenant == .limited(BucketDecision(check: tenant, decision: empty)))
    }

    @Test func routesDrawFromTheirBuckets() {
        let tier = RateTier.builtIn["pro"]!
        let ipLimits = IPLimitConfig(challenge: 120, validate: 30)
        let client = IPAddress("::ffff:203.0.113.9")!
        let app = "ABCDE12345.com.example.app"
        #expect(RateLimitedRoute.challenge.checks(appID: app, clientIP: client, tier: tier, ipLimits: ipLimits) == [
            BucketCheck(key: "ag:{ABCDE12345.com.example.app}:rl:challenge", limitPerMinute: 1_000, name: "challenge"),
            BucketCheck(key: "ag:ip:{203.0.113.9}:rl:challenge", limitPerMinute: 120, name: "ip-challenge"),
        ])
        #expect(RateLimitedRoute.validate.checks(appID: app, clientIP: client, tier: tier, ipLimits: ipLimits) == [
            BucketCheck(key: "ag:{ABCDE12345.com.example.app}:rl:attest", limitPerMinute: 500, name: "attest"),
            BucketCheck(key: "ag:ip:{203.0.113.9}:rl:validate", limitPerMinute: 30, name: "ip-validate"),
        ])
        #expect(RateLimitedRoute.refresh.checks(appID: app, clientIP: client, tier: tier, ipLimits: ipLimits) == [
            BucketCheck(key: "ag:{ABCDE12345.com.example.app}:rl:attest", limitPerMinute: 500, name: "attest"),
        ])
        #expect(RateLimitedRoute.api.checks(appID: app, clientIP: client, tier: tier, ipLimits: ipLimits) == [
            BucketCheck(key: "ag:{ABCDE12345.com.example.app}:rl:api", limitPerMinute: 10_000, name: "api"),
        ])
        #expect(RateLimitedRoute.apiCheck(tenant: TenantBucketKeys(appID: app), tier: tier)
                == BucketCheck(key: "ag:{ABCDE12345.com.example.app}:rl:api", limitPerMinute: 10_000, name: "api"))
        for policy in StoreErrorPolicy.allCases {
            let config = RateLimitConfig(onStoreError: policy)
            #expect(RateLimitedRoute.challenge.fallback(config) == .refuse)
            #expect(RateLimitedRoute.validate.fallback(config) == .refuse)
            #expect(RateLimitedRoute.refresh.fallback(config) == .refuse)
            #expect(RateLimitedRoute.api.fallback(config) == RateLimitFallback(policy))
        }
        #expect(RateLimitFallback(.local) == .local)
        #expect(RateLimitFallback(.allow) == .allow)
        #expect(RateLimitFallback(.deny) == .refuse)
    }

    @Test func lruCacheEvictsTheLeastRecentlyUsed() {
        var cache = LRUCache<String, Int>(capacity: 3)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "c")
        #expect(cache.value(for: "a") == 1)
        cache.set(4, for: "d")
        #expect(!cache.contains("b"))
        #expect(cache.count == 3)
        cache.set(30, for: "c")
        cache.set(5, for: "e")
        #expect(!cache.contains("a"))
        #expect(cache.value(for: "c") == 30)
        #expect(cache.value(for: "d") == 4)
        #expect(cache.value(for: "e") == 5)
        for index in 0..<1_000 { cache.set(index, for: "k\(index)") }
        #expect(cache.count == 3)
        #expect(["k997", "k998", "k999"].allSatisfy { cache.contains($0) })
    }
}
