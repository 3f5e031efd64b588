import AGRedis
import AGTestSupport
import Foundation
import Testing

@testable import AGPolicy
@testable import AGGateway

/// The proxied `api` bucket spent from leases: the lease script matches the pure maths, a
/// worker's burst costs a few Redis calls instead of one per request, nothing is ever admitted
/// beyond what the shared bucket held, and unspent tokens lapse.
@Suite("api leases")
struct RateLimitLeaseTests {
    static func key() -> String { "ag:{L\(UUID().uuidString.prefix(8)).com.example.app}:rl:api" }
    static let start: Int64 = 1_700_000_000 * 1_000_000

    static func evalCalls(_ instance: RateLimitTestInstance) async throws -> Int {
        let info = try await instance.send(["INFO", "commandstats"]).get().string ?? ""
        // Every EVALSHA (and the EVAL after a NOSCRIPT) is one round trip the lease cost.
        return info.split(separator: "\r\n").filter { $0.hasPrefix("cmdstat_evalsha:") || $0.hasPrefix("cmdstat_eval:") }
            .compactMap { Int($0.split(separator: "=")[1].split(separator: ",")[0]) }.reduce(0, +)
    }

    @Test("the lease script takes what the pure bucket takes", arguments: [(10, 3), (10, 20), (600, 64), (1, 1)])
    func leaseMatchesPureMaths(limit: Int, want: Int) async throws {
        try await RedisServer.withPrivate { redis in
            try await RateLimitTestInstance.with(redis.url) { instance in
                let key = Self.key()
                let epochKey = key.replacingOccurrences(of: "rl:api", with: "devepoch")
                var bucket = TokenBucket(limitPerMinute: limit, now: Self.start)
                for offset: Int64 in [0, 0, 500_000, 6_000_000, 6_000_000, 60_000_000] {
                    let now = Self.start + offset
                    let expected = bucket.take(upTo: want, now: now, limitPerMinute: limit)
                    let reply = try await instance.send(["EVAL", RateLimitScript.leaseSource, "2", key, epochKey, String(now),
                                                         String(limit), String(want), "42"]).get()
                    let parsed = try #require(RateLimitScript.leaseDecision(from: reply, limit: limit))
                    #expect(parsed.granted == expected.granted, "granted at +\(offset)")
                    #expect(parsed.decision == expected.decision, "decision at +\(offset)")
                    #expect(parsed.epoch == "42", "a missing epoch starts at the seed and stays")
                }
            }
        }
    }

    @Test("batch sizes", arguments: [
        (600, Int.max, 1000, 10), (600, Int.max, 3, 3), (60_000, Int.max, 1000, 64), (60, Int.max, 50, 1),
        (6000, 40, 1000, 5), (6000, 7, 1000, 1), (6000, 0, 1000, 1),
    ])
    func batchSizes(limit: Int, remaining: Int, demand: Int, expected: Int) {
        #expect(LeaseSizing.batch(limitPerMinute: limit, remaining: remaining, demand: demand) == expected)
    }

    @Test func aBurstCostsAFewCallsAndNeverMoreThanTheBucket() async throws {
        try await RedisServer.withPrivate { redis in
            let time = ManualTime()
            try await RateLimitTestInstance.with(redis.url, time: time) { instance in
                let check = BucketCheck(key: Self.key(), limitPerMinute: 6000, name: "api")
                let before = try await Self.evalCalls(instance)
                var admitted = 0
                for _ in 0..<20 {
                    let outcomes = await instance.leaseBurst(50, check)
                    admitted += outcomes.filter { if case .allowed = $0 { true } else { false } }.count
                }
                let calls = try await Self.evalCalls(instance) - before
                // The clock stands still: the bucket's 6,000 tokens are all there is.
                #expect(admitted == 1000)
                #expect(calls < 100, "\(calls) lease calls for 1,000 requests")
                // Exhausted: the rest are refused with a Retry-After.
                var refused = 0
                for _ in 0..<200 {
                    let outcomes = await instance.leaseBurst(50, check)
                    refused += outcomes.filter { if case .limited = $0 { true } else { false } }.count
                }
                #expect(refused > 0)
                let last = await instance.leaseBurst(1, check)
                guard case .limited(let decision) = last[0] else {
                    Issue.record("expected a refusal, got \(last[0])")
                    return
                }
                #expect(decision.decision.retryAfter >= 1)
            }
        }
    }

    /// Two buckets' requests interleaved one by one (each lookup misses the limiter's last-key
    /// memo, `LastKeyed`), one of them named by two string objects: each bucket keeps its own
    /// lease, limit and count, and both are still spent locally (a memo that answered for the
    /// wrong key would cost a lease call per request).
    @Test func interleavedBucketsKeepTheirOwnLeases() async throws {
        try await RedisServer.withPrivate { redis in
            let time = ManualTime()
            try await RateLimitTestInstance.with(redis.url, time: time) { instance in
                let small = BucketCheck(key: Self.key(), limitPerMinute: 3000, name: "api")
                let large = BucketCheck(key: Self.key(), limitPerMinute: 6000, name: "api")
                // The same key as `small`, from a string of its own.
                let smallAgain = BucketCheck(key: String(small.key.utf8.map { Character(UnicodeScalar($0)) }),
                                             limitPerMinute: 3000, name: "api")
                let before = try await Self.evalCalls(instance)
                var admitted = [0, 0]
                for round in 0..<200 {
                    for (index, check) in [round % 2 == 0 ? small : smallAgain, large].enumerated() {
                        let outcome = await instance.leaseBurst(1, check)[0]
                        if case .allowed(let decision) = outcome {
                            admitted[index] += 1
                            #expect(decision?.check.limitPerMinute == check.limitPerMinute)
                            #expect(decision?.decision.limit == check.limitPerMinute, "round \(round)")
                        }
                    }
                }
                #expect(admitted == [200, 200])
                let calls = try await Self.evalCalls(instance) - before
                #expect(calls < 100, "\(calls) lease calls for 400 requests")
            }
        }
    }

    @Test func unspentTokensLapseWithTheLease() async throws {
        try await RedisServer.withPrivate { redis in
            let time = ManualTime()
            try await RateLimitTestInstance.with(redis.url, time: time) { instance in
                let check = BucketCheck(key: Self.key(), limitPerMinute: 600, name: "api")
                // The first lease is sized for one request; the nine that queued behind it get a
                // lease sized for the nine plus the one before, so one token is left over.
                _ = await instance.leaseBurst(10, check)
                let leased = try await Self.evalCalls(instance)
                _ = await instance.leaseBurst(1, check)
                #expect(try await Self.evalCalls(instance) == leased, "spent from the lease")
                time.advance(.seconds(2))
                _ = await instance.leaseBurst(1, check)
                #expect(try await Self.evalCalls(instance) == leased + 1, "a lapsed lease is fetched again")
            }
        }
    }

    @Test func withRedisGoneLeasesFallBack() async throws {
        let redis = try await RedisServer.start()
        redis.stop()
        // A standing clock: the local fallback bucket refills with it (real time let a 61st
        // token in when the burst took over a second under TSan).
        try await RateLimitTestInstance.with(redis.url, time: ManualTime()) { instance in
            let check = BucketCheck(key: Self.key(), limitPerMinute: 60, name: "api")
            #expect(await instance.leaseBurst(1, check, fallback: .refuse) == [.storeUnavailable])
            #expect(await instance.leaseBurst(1, check, fallback: .allow) == [.allowed(nil)])
            let local = await instance.leaseBurst(61, check, fallback: .local)
            #expect(local.filter { if case .allowed = $0 { true } else { false } }.count == 60)
        }
    }
}
