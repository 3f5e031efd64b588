import AGConfig
import AGPolicy
import Testing

/// One `take` in a scripted timeline and what it must decide.
struct BucketStep: Sendable, CustomStringConvertible {
    /// Microseconds after `BucketTimeline.start`.
    let at: Int64
    let limit: Int
    let allowed: Bool
    let remaining: Int
    /// Seconds after the start second; nil when the step does not pin it.
    let resetAfter: Int64?
    let retryAfter: Int
    /// Takes before this step that must all succeed (filler to empty a bucket), at the same time.
    let warmup: Int

    init(at: Int64, limit: Int, allowed: Bool, remaining: Int, resetAfter: Int64? = nil, retryAfter: Int = 0, warmup: Int = 0) {
        self.at = at
        self.limit = limit
        self.allowed = allowed
        self.remaining = remaining
        self.resetAfter = resetAfter
        self.retryAfter = retryAfter
        self.warmup = warmup
    }

    var description: String { "t+\(at)µs limit \(limit)" }
}

/// Named timelines shared by the pure-maths table and the script-equivalence test.
enum BucketTimeline {
    static let start: Int64 = 1_700_000_000 * 1_000_000
    static let second: Int64 = 1_000_000

    static let all: [(name: String, steps: [BucketStep])] = [
        ("a fresh bucket is full and counts down", [
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 59, resetAfter: 1),
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 58, resetAfter: 2),
        ]),
        ("the last token, then a refusal with Retry-After 1", [
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 0, resetAfter: 60, warmup: 59),
            BucketStep(at: 0, limit: 60, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 1),
            BucketStep(at: 0, limit: 60, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 1),
        ]),
        ("refill of one token per second at 60/min", [
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 0, warmup: 59),
            BucketStep(at: second / 2, limit: 60, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 1),
            BucketStep(at: second - 1, limit: 60, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: second, limit: 60, allowed: true, remaining: 0, resetAfter: 61),
            BucketStep(at: 10 * second, limit: 60, allowed: true, remaining: 8, resetAfter: 62),
        ]),
        ("fractional tokens at 30/min: half a token is not enough", [
            BucketStep(at: 0, limit: 30, allowed: true, remaining: 0, resetAfter: 60, warmup: 29),
            BucketStep(at: second, limit: 30, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: 2 * second - 1, limit: 30, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: 2 * second, limit: 30, allowed: true, remaining: 0, resetAfter: 62),
        ]),
        ("exact boundary at 1/min: a token after exactly 60 s, not a microsecond earlier", [
            BucketStep(at: 0, limit: 1, allowed: true, remaining: 0, resetAfter: 60),
            BucketStep(at: 0, limit: 1, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 60),
            BucketStep(at: 59 * second + 1, limit: 1, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: 60 * second - 1, limit: 1, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 1),
            BucketStep(at: 60 * second, limit: 1, allowed: true, remaining: 0, resetAfter: 120),
        ]),
        ("Retry-After and Reset round up", [
            BucketStep(at: 0, limit: 7, allowed: true, remaining: 0, resetAfter: 60, warmup: 6),
            // One token takes 60/7 ≈ 8.57 s.
            BucketStep(at: 0, limit: 7, allowed: false, remaining: 0, retryAfter: 9),
            BucketStep(at: 8 * second, limit: 7, allowed: false, remaining: 0, resetAfter: 60, retryAfter: 1),
            BucketStep(at: 8_571_429, limit: 7, allowed: true, remaining: 0, resetAfter: 69),
        ]),
        ("capacity caps the refill after a long idle time", [
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 0, warmup: 59),
            BucketStep(at: 3_600 * second, limit: 60, allowed: true, remaining: 59, resetAfter: 3_601),
        ]),
        ("a clock going backwards counts as no elapsed time", [
            BucketStep(at: 10 * second, limit: 60, allowed: true, remaining: 0, resetAfter: 70, warmup: 59),
            BucketStep(at: 0, limit: 60, allowed: false, remaining: 0, resetAfter: 70, retryAfter: 1),
            BucketStep(at: 5 * second, limit: 60, allowed: false, remaining: 0, retryAfter: 1),
            // Only the one second after the latest time seen counts, not the 11 s since t+0.
            BucketStep(at: 11 * second, limit: 60, allowed: true, remaining: 0, resetAfter: 71),
        ]),
        ("a lower limit clamps the tokens to the new capacity", [
            BucketStep(at: 0, limit: 600, allowed: true, remaining: 599),
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 59, resetAfter: 1),
            BucketStep(at: 0, limit: 600, allowed: true, remaining: 58),
        ]),
        ("a higher limit refills faster but adds no tokens at once", [
            BucketStep(at: 0, limit: 60, allowed: true, remaining: 0, warmup: 59),
            BucketStep(at: 0, limit: 600, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: second / 10, limit: 600, allowed: true, remaining: 0, resetAfter: 61),
        ]),
        // README, "Rate limits and tiers": a raise applies to the time since the last use
        // (an independent sweep, stop 36, took it for over-admission; kept, and documented).
        ("a raised limit applies to the time since the last use, capped at the new capacity", [
            BucketStep(at: 0, limit: 10, allowed: true, remaining: 0, warmup: 9),
            BucketStep(at: 6 * second, limit: 1200, allowed: true, remaining: 119),
            BucketStep(at: 600 * second, limit: 1200, allowed: true, remaining: 1199),
        ]),
        ("a refusal changes no state", [
            BucketStep(at: 0, limit: 2, allowed: true, remaining: 0, warmup: 1),
            BucketStep(at: 10 * second, limit: 2, allowed: false, remaining: 0, retryAfter: 20),
            BucketStep(at: 29 * second, limit: 2, allowed: false, remaining: 0, retryAfter: 1),
            BucketStep(at: 30 * second, limit: 2, allowed: true, remaining: 0, resetAfter: 90),
        ]),
    ]
}

@Suite("TokenBucket")
struct RateLimitTokenBucketTests {
    @Test("timelines", arguments: BucketTimeline.all.map(\.name))
    func timeline(name: String) {
        let steps = BucketTimeline.all.first { $0.name == name }!.steps
        var bucket: TokenBucket?
        for step in steps {
            let now = BucketTimeline.start + step.at
            if bucket == nil { bucket = TokenBucket(limitPerMinute: step.limit, now: now) }
            for _ in 0..<step.warmup {
                #expect(bucket!.take(now: now, limitPerMinute: step.limit).allowed, "warm-up before \(step)")
            }
            let decision = bucket!.take(now: now, limitPerMinute: step.limit)
            Self.expect(decision, matches: step)
        }
    }

    static func expect(_ decision: TokenBucket.Decision, matches step: BucketStep, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(decision.allowed == step.allowed, "allowed at \(step)", sourceLocation: sourceLocation)
        #expect(decision.limit == step.limit, "limit at \(step)", sourceLocation: sourceLocation)
        #expect(decision.remaining == step.remaining, "remaining at \(step)", sourceLocation: sourceLocation)
        #expect(decision.retryAfter == step.retryAfter, "retryAfter at \(step)", sourceLocation: sourceLocation)
        if let resetAfter = step.resetAfter {
            #expect(decision.resetAt == BucketTimeline.start / BucketTimeline.second + resetAfter, "resetAt at \(step)",
                    sourceLocation: sourceLocation)
        }
    }

    @Test func fractionalTokensAccumulate() {
        var bucket = TokenBucket(limitPerMinute: 60, now: 0)
        for _ in 0..<60 { _ = bucket.take(now: 0) }
        #expect(bucket.tokens == 0)
        bucket.refill(now: 250_000, limitPerMinute: 60)
        #expect(bucket.tokens == 0.25)
        bucket.refill(now: 500_000, limitPerMinute: 60)
        #expect(bucket.tokens == 0.5)
        #expect(!bucket.take(now: 500_000).allowed)
        #expect(bucket.tokens == 0.5)
        #expect(bucket.take(now: 1_000_000).allowed)
        #expect(bucket.tokens == 0)
    }

    @Test func takeAllIsAllOrNothing() {
        var buckets = [TokenBucket(limitPerMinute: 10, now: 0), TokenBucket(limitPerMinute: 1, now: 0)]
        let first = TokenBucket.takeAll(&buckets, now: 0, limits: [10, 1])
        #expect(first.allowed)
        #expect(first.decisions.map(\.remaining) == [9, 0])
        let before = buckets
        let second = TokenBucket.takeAll(&buckets, now: 0, limits: [10, 1])
        #expect(!second.allowed)
        #expect(buckets == before)
        #expect(second.decisions.map(\.allowed) == [true, false])
        #expect(second.decisions.map(\.retryAfter) == [0, 60])
        #expect(second.decisions.map(\.remaining) == [9, 0])
    }

    @Test func limitsAreClampedToTheExactRange() {
        #expect(BucketCheck(key: "k", limitPerMinute: 0, name: "api").limitPerMinute == 1)
        #expect(BucketCheck(key: "k", limitPerMinute: .max, name: "api").limitPerMinute == TokenBucket.maximumLimitPerMinute)
        var bucket = TokenBucket(limitPerMinute: .max, now: 0)
        #expect(bucket.take(now: 0).remaining == TokenBucket.maximumLimitPerMinute - 1)
    }
}
