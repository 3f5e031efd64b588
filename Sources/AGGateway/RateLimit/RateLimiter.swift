import AGPolicy
import AGRedis

/// One bucket's decision, with the check it answers.
public struct BucketDecision: Sendable, Hashable {
    public let check: BucketCheck
    public let decision: TokenBucket.Decision

    public init(check: BucketCheck, decision: TokenBucket.Decision) {
        self.check = check
        self.decision = decision
    }
}

/// The verdict on one request.
public enum RateLimitOutcome: Sendable, Hashable {
    /// Go on. The decision is the most restrictive bucket's (fewest tokens left), for the
    /// headers; nil when Redis is down and the fallback is `.allow`.
    case allowed(BucketDecision?)
    /// Answer 429 `rate_limited`. The decision is the refusing bucket's (the longest wait).
    case limited(BucketDecision)
    /// Redis could not decide and the fallback refuses: answer 503.
    case storeUnavailable

    /// `X-RateLimit-Limit` (per minute), `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix
    /// seconds) and, when limited, `Retry-After` (seconds). Empty when no bucket was consulted.
    public var headers: [(String, String)] {
        switch self {
        case .allowed(nil), .storeUnavailable:
            return []
        case .allowed(let bucket?):
            return Self.headers(bucket.decision)
        case .limited(let bucket):
            return Self.headers(bucket.decision) + [("Retry-After", String(bucket.decision.retryAfter))]
        }
    }

    private static func headers(_ decision: TokenBucket.Decision) -> [(String, String)] {
        [("X-RateLimit-Limit", String(decision.limit)),
         ("X-RateLimit-Remaining", String(decision.remaining)),
         ("X-RateLimit-Reset", String(decision.resetAt))]
    }

    /// Combines per-bucket decisions (in `checks` order) into one outcome.
    static func combining(_ checks: [BucketCheck], allowed: Bool, _ decisions: [TokenBucket.Decision]) -> RateLimitOutcome {
        let buckets = zip(checks, decisions).map { BucketDecision(check: $0, decision: $1) }
        if allowed {
            let tightest = buckets.min { a, b in
                (a.decision.remaining, -a.decision.resetAt) < (b.decision.remaining, -b.decision.resetAt)
            }
            return .allowed(tightest)
        }
        let refusing = buckets.filter { !$0.decision.allowed }
        let longest = refusing.max { $0.decision.retryAfter < $1.decision.retryAfter } ?? buckets[0]
        return .limited(longest)
    }
}

/// Rate-limit decisions for one worker: one Redis script call per request, with a fallback
/// while Redis is unreachable.
///
/// Confined to the worker's loop thread, like its `RedisClient`. Every Redis failure (not
/// connected, timeout, error reply) applies the caller's `RateLimitFallback`; the next
/// successful call returns to Redis. Each switch is logged once and reported to
/// `onModeChange`, so a dead Redis costs one log line, not one per request.
public final class RateLimiter: Limiter {
    /// Where decisions currently come from.
    public enum Mode: String, Sendable, Hashable {
        case redis
        /// The last Redis call failed; requests follow their `RateLimitFallback`.
        case fallback
    }

    public private(set) var mode: Mode = .redis
    /// Called on each switch, e.g. to count `attestgate_ratelimit_mode_switches_total{mode=…}`.
    public var onModeChange: ((Mode) -> Void)?

    let redis: RedisClient
    private let localBuckets: LocalBuckets
    let time: any TimeSource
    private let logger: Logger
    /// The `api` leases of this worker by bucket key (see `RateLimiter+Leases`).
    var leases: [String: Lease] = [:]

    /// - Parameter localBuckets: the instance's shared fallback buckets.
    public init(redis: RedisClient, localBuckets: LocalBuckets, time: any TimeSource, logger: Logger,
                onModeChange: ((Mode) -> Void)? = nil) {
        self.redis = redis
        self.localBuckets = localBuckets
        self.time = time
        self.logger = logger
        self.onModeChange = onModeChange
    }

    /// Takes a token from every bucket in `checks` (all or none) and completes exactly once on
    /// the loop thread. When Redis is not connected, the completion runs before `check` returns.
    public func check(_ checks: [BucketCheck], fallback: RateLimitFallback,
                      completion: @escaping (RateLimitOutcome) -> Void) {
        precondition(!checks.isEmpty, "a rate-limit check needs at least one bucket")
        let limits = checks.map(\.limitPerMinute)
        redis.evalScript(RateLimitScript.script, keys: checks.map(\.key),
                         args: RateLimitScript.arguments(checks, now: time.nowMicroseconds)) { result in
            switch result {
            case .success(let reply):
                guard let (allowed, decisions) = RateLimitScript.decisions(from: reply, limits: limits) else {
                    self.enterFallback(reason: "unexpected rate-limit script reply")
                    completion(self.fallbackOutcome(checks, fallback))
                    return
                }
                self.leaveFallback()
                completion(.combining(checks, allowed: allowed, decisions))
            case .failure(let error):
                self.enterFallback(reason: error.description)
                completion(self.fallbackOutcome(checks, fallback))
            }
        }
    }

    func fallbackOutcome(_ checks: [BucketCheck], _ fallback: RateLimitFallback) -> RateLimitOutcome {
        switch fallback {
        case .refuse:
            return .storeUnavailable
        case .allow:
            return .allowed(nil)
        case .local:
            let (allowed, decisions) = localBuckets.take(checks)
            return .combining(checks, allowed: allowed, decisions)
        }
    }

    func enterFallback(reason: String) {
        guard mode == .redis else { return }
        mode = .fallback
        logger.warn("rate limiter lost redis, applying fallback policies", [("reason", .string(reason))])
        onModeChange?(.fallback)
    }

    func leaveFallback() {
        guard mode == .fallback else { return }
        mode = .redis
        logger.info("rate limiter back on redis", [])
        onModeChange?(.redis)
    }
}
