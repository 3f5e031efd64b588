import AGRedis
import AGTestSupport
import Foundation
import Testing
@testable import AGConfig
@testable import AGPolicy

/// The Lua script against a real `redis-server`: the same decisions as `TokenBucket`, atomic
/// across connections, all-or-nothing across keys.
@Suite("Rate-limit script")
struct RateLimitScriptTests {
    private static func uniqueKey(_ bucket: String = "api") -> String {
        "ag:{T\(UUID().uuidString.prefix(8)).com.example.app}:rl:\(bucket)"
    }

    /// Runs `body` with one instance on a private server of its own.
    /// The script with its keys made persistent right after the decision, atomically: these
    /// tests replay virtual timelines, while a bucket's expiry runs on Redis's real clock, and a
    /// machine stalled for a few seconds between two calls must not expire the bucket under
    /// them (expiry has its own test, `idleBucketsVanishOnceFull`).
    static let persistentSource = RateLimitScript.source.replacingOccurrences(
        of: "return take_buckets(now_us, KEYS, ARGV, 2)",
        with: "local reply = take_buckets(now_us, KEYS, ARGV, 2)\nfor i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end\nreturn reply")

    private static func withInstance(_ body: (RateLimitTestInstance) async throws -> Void) async throws {
        try await RedisServer.withPrivate { redis in
            // These tests check the script's decisions, not the deadline: under a sanitizer on
            // the loaded machine, the later commands of a 61-command burst on one connection
            // outran 250 ms (storeUnavailable from take 28 on).
            try await RateLimitTestInstance.with(redis.url, timeout: TestBuild.sanitizer == nil ? .milliseconds(250) : .seconds(2), body)
        }
    }

    @Test("same decisions as TokenBucket on every timeline", arguments: BucketTimeline.all.map(\.name))
    func matchesPureMaths(name: String) async throws {
        let steps = BucketTimeline.all.first { $0.name == name }!.steps
        try await Self.withInstance { instance in
            let source = Self.persistentSource
            let key = Self.uniqueKey()
            var bucket: TokenBucket?
            for step in steps {
                let now = BucketTimeline.start + step.at
                if bucket == nil { bucket = TokenBucket(limitPerMinute: step.limit, now: now) }
                for _ in 0...step.warmup {
                    let expected = bucket!.take(now: now, limitPerMinute: step.limit)
                    let reply = await instance.send(["EVAL", source, "1", key, String(now), String(step.limit)])
                    let parsed = try #require(RateLimitScript.decisions(from: try reply.get(), limits: [step.limit]))
                    #expect(parsed.allowed == expected.allowed, "allowed at \(step)")
                    #expect(parsed.decisions == [expected], "decision at \(step)")
                }
            }
        }
    }

    @Test func allOrNothingAcrossKeysMatchesTakeAll() async throws {
        try await Self.withInstance { instance in
            let source = Self.persistentSource
            let keys = [Self.uniqueKey("challenge"), "ag:ip:{192.0.2.1}:rl:challenge"]
            let limits = [5, 2]
            var buckets = limits.map { TokenBucket(limitPerMinute: $0, now: BucketTimeline.start) }
            for offset: Int64 in [0, 0, 0, 1_000_000, 30_000_000, 30_000_000, 30_000_000, 45_000_000] {
                let now = BucketTimeline.start + offset
                let expected = TokenBucket.takeAll(&buckets, now: now, limits: limits)
                let reply = await instance.send(["EVAL", source, "2"] + keys + [String(now)] + limits.map(String.init))
                let parsed = try #require(RateLimitScript.decisions(from: try reply.get(), limits: limits))
                #expect(parsed.allowed == expected.allowed, "allowed at +\(offset)")
                #expect(parsed.decisions == expected.decisions, "decisions at +\(offset)")
            }
        }
    }

    @Test func sixtyPerMinuteInRealTime() async throws {
        try await Self.withInstance { instance in
            let check = BucketCheck(key: Self.uniqueKey(), limitPerMinute: 60, name: "api")
            let started = Int64(Date().timeIntervalSince1970)
            let outcomes = await instance.burst(61, [check])
            let finished = Int64(Date().timeIntervalSince1970.rounded(.up))
            for (index, outcome) in outcomes.prefix(60).enumerated() {
                guard case .allowed(let bucket?) = outcome else {
                    Issue.record("take \(index + 1) was \(outcome)")
                    continue
                }
                #expect(bucket.decision.remaining == 59 - index)
                #expect(bucket.decision.limit == 60)
                #expect(bucket.check == check)
                // index + 1 tokens are missing: full again index + 1 seconds from now, rounded up.
                #expect((started + Int64(index) + 1...finished + Int64(index) + 2).contains(bucket.decision.resetAt))
            }
            guard case .limited(let refused) = outcomes[60] else {
                Issue.record("take 61 was \(outcomes[60])")
                return
            }
            #expect(refused.decision.retryAfter == 1)
            #expect(refused.decision.remaining == 0)
            #expect((started + 59...finished + 61).contains(refused.decision.resetAt))
            let headers = Dictionary(uniqueKeysWithValues: outcomes[60].headers)
            #expect(headers["X-RateLimit-Limit"] == "60")
            #expect(headers["X-RateLimit-Remaining"] == "0")
            #expect(headers["X-RateLimit-Reset"] == String(refused.decision.resetAt))
            #expect(headers["Retry-After"] == "1")
        }
    }

    @Test func aBucketKeyLivesUntilFullPlusAMargin() async throws {
        try await Self.withInstance { instance in
            let key = Self.uniqueKey()
            _ = await instance.burst(3, [BucketCheck(key: key, limitPerMinute: 6, name: "api")])
            // 3 tokens at one per 10 s refill in 30 s; the key lives that long plus one second.
            let ttl = try #require(try await instance.send(["PTTL", key]).get().int)
            #expect((20_000...31_000).contains(ttl), "ttl \(ttl)")
            let fields = try #require(try await instance.send(["HGETALL", key]).get().hashFields)
            // 3 tokens left, plus the little that refilled between the takes.
            let units = try #require(fields["tokens"].flatMap(Int64.init))
            #expect((3 * TokenBucket.unitsPerToken..<4 * TokenBucket.unitsPerToken).contains(units))
            #expect(fields["ts"].flatMap(Int64.init) != nil)
        }
    }

    @Test func idleBucketsVanishOnceFull() async throws {
        try await Self.withInstance { instance in
            let key = Self.uniqueKey()
            // One token at 10/s refills in 100 ms: the key goes about 1.1 s later (a missing
            // bucket reads as full).
            _ = await instance.burst(1, [BucketCheck(key: key, limitPerMinute: 600, name: "api")])
            var gone = false
            for _ in 0..<250 where !gone {
                gone = try await instance.send(["EXISTS", key]).get() == .integer(0)
                if !gone { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(gone)
        }
    }

    @Test func aFlushedScriptCacheIsRefilledTransparently() async throws {
        try await Self.withInstance { instance in
            let check = BucketCheck(key: Self.uniqueKey(), limitPerMinute: 6, name: "api")
            #expect(await instance.check([check]).headers.first { $0.0 == "X-RateLimit-Remaining" }?.1 == "5")
            _ = try await instance.send(["SCRIPT", "FLUSH"]).get()
            #expect(await instance.check([check]).headers.first { $0.0 == "X-RateLimit-Remaining" }?.1 == "4")
            #expect(await instance.mode == .redis)
        }
    }

    @Test func refusedCombinedCheckConsumesNeitherBucket() async throws {
        // A controlled clock: both checks happen at one instant however loaded the machine is.
        try await RedisServer.withPrivate { redis in
            try await RateLimitTestInstance.with(redis.url, time: ManualTime()) { instance in
                let tenant = BucketCheck.tenant(appID: "T\(UUID().uuidString.prefix(8)).com.example.app", .challenge, limitPerMinute: 6)
                let ip = BucketCheck.ip(IPAddress("198.51.100.7")!, .challenge, limitPerMinute: 1)
                #expect(ip.key == "ag:ip:{198.51.100.7}:rl:challenge")
                let first = await instance.check([tenant, ip])
                guard case .allowed(let tightest?) = first else {
                    Issue.record("first combined check was \(first)")
                    return
                }
                #expect(tightest.check == ip)
                let tenantState = try await instance.send(["HGETALL", tenant.key]).get()
                let ipState = try await instance.send(["HGETALL", ip.key]).get()
                let refused = await instance.check([tenant, ip])
                guard case .limited(let bucket) = refused else {
                    Issue.record("second combined check was \(refused)")
                    return
                }
                #expect(bucket.check == ip)
                #expect(bucket.decision.retryAfter >= 59)
                // The two buckets live in different cluster slots, so they are taken by two calls and
                // the tenant's token is refunded: its hash is rewritten at the refusal's time, with the
                // same tokens; the refusing bucket is not written at all.
                _ = tenantState
                #expect(try await instance.send(["HGETALL", ip.key]).get() == ipState)
                // The tenant bucket alone still has the 5 tokens the first check left.
                guard case .allowed(let alone?) = await instance.check([tenant]) else {
                    Issue.record("tenant bucket alone was refused")
                    return
                }
                #expect(alone.decision.remaining == 4)
            }
        }
    }

    @Test func twoInstancesShareOneLimit() async throws {
        try await RedisServer.withPrivate { redis in
            // The decisions are the subject, not the deadline (see `withInstance`).
            let timeout: Duration = TestBuild.sanitizer == nil ? .milliseconds(250) : .seconds(2)
            try await RateLimitTestInstance.with(redis.url, timeout: timeout) { a in
                try await RateLimitTestInstance.with(redis.url, timeout: timeout) { b in
                    let limit = 100
                    let check = BucketCheck(key: Self.uniqueKey(), limitPerMinute: limit, name: "api")
                    let started = Date()
                    async let fromA = a.burst(150, [check])
                    async let fromB = b.burst(150, [check])
                    let outcomes = await fromA + fromB
                    let elapsed = Date().timeIntervalSince(started)
                    let allowed = outcomes.filter { if case .allowed = $0 { true } else { false } }.count
                    // Exactly the capacity, plus whatever refilled while the bursts ran (100/min).
                    let refilled = Int((elapsed * Double(limit) / 60).rounded(.up))
                    #expect(allowed >= limit)
                    #expect(allowed <= limit + refilled + 1)
                    #expect(outcomes.allSatisfy { $0 != .storeUnavailable })
                }
            }
        }
    }
}
