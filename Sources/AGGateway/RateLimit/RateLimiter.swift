import AGHTTP
import AGPolicy
import AGRedis

/// Why a bucket could not be decided in Redis (for the fallback's log line).
private struct TakeFailure: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

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

    /// The decision the `X-RateLimit-*` headers describe, when a bucket was consulted.
    public var headerDecision: TokenBucket.Decision? {
        switch self {
        case .allowed(let bucket?): bucket.decision
        case .limited(let bucket): bucket.decision
        case .allowed(nil), .storeUnavailable: nil
        }
    }

    /// The same fields written straight into a head (the gateway's answers, proxied answers),
    /// the numbers as digits.
    static func appendHeaders(_ decision: TokenBucket.Decision, to writer: inout HTTPHeadWriter) {
        writer.append("X-RateLimit-Limit: " as StaticString)
        writer.append(decimal: decision.limit)
        writer.append("\r\nX-RateLimit-Remaining: " as StaticString)
        writer.append(decimal: decision.remaining)
        writer.append("\r\nX-RateLimit-Reset: " as StaticString)
        writer.append(decimal: Int(decision.resetAt))
        writer.appendCRLF()
    }

    static func headers(_ decision: TokenBucket.Decision) -> [(String, String)] {
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

/// Rate-limit decisions for one worker: one Redis script call per request (the proxied `api`
/// bucket: a lease per batch of requests), with a fallback while Redis is unreachable.
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
    var leases = LastKeyed<Lease>()
    /// The device epoch of each tenant by its key, as last read (see `RateLimiter+Devices`).
    var epochs = LastKeyed<KnownEpoch>()

    /// - Parameter localBuckets: the instance's shared fallback buckets.
    public init(redis: RedisClient, localBuckets: LocalBuckets, time: any TimeSource, logger: Logger,
                onModeChange: ((Mode) -> Void)? = nil) {
        self.redis = redis
        self.localBuckets = localBuckets
        self.time = time
        self.logger = logger
        self.onModeChange = onModeChange
    }

    /// Takes a token from every bucket in `checks`, or from none, and completes exactly once on
    /// the loop thread (before `check` returns when Redis is not connected).
    ///
    /// Buckets in one cluster slot are decided by one script call, all or nothing. Buckets in
    /// several slots (a tenant's and a client IP's) are taken in parallel, one call per slot;
    /// when any refuses, the tokens the others took are given back (`AdmissionScripts.refund`).
    /// So a refused request consumes no token once its refund has run; until then (one round
    /// trip) the other bucket is one token lower for concurrent requests, and should Redis fail
    /// before the refund lands, that token stays spent.
    public func check(_ checks: [BucketCheck], fallback: RateLimitFallback,
                      completion: @escaping (RateLimitOutcome) -> Void) {
        precondition(!checks.isEmpty, "a rate-limit check needs at least one bucket")
        var groups: [[Int]] = []
        var slots: [UInt16] = []
        for (index, check) in checks.enumerated() {
            let slot = HashSlot.slot(of: check.key)
            if let group = slots.firstIndex(of: slot) {
                groups[group].append(index)
            } else {
                slots.append(slot)
                groups.append([index])
            }
        }
        var replies: [(allowed: Bool, decisions: [TokenBucket.Decision])?] = Array(repeating: nil, count: groups.count)
        var failure: String?
        var outstanding = groups.count
        let now = time.nowMicroseconds
        for (number, group) in groups.enumerated() {
            let members = group.map { checks[$0] }
            take(members, now: now) { result in
                switch result {
                case .success(let reply): replies[number] = reply
                case .failure(let error): failure = failure ?? error.reason
                }
                outstanding -= 1
                guard outstanding == 0 else { return }
                completion(self.settle(checks, groups, replies, failure: failure, fallback: fallback, now: now))
            }
        }
    }

    /// One script call for buckets of one slot.
    private func take(_ checks: [BucketCheck], now: Int64,
                      completion: @escaping (Result<(allowed: Bool, decisions: [TokenBucket.Decision]), TakeFailure>) -> Void) {
        let limits = checks.map(\.limitPerMinute)
        redis.evalScript(RateLimitScript.script, keys: checks.map(\.key),
                         args: RateLimitScript.arguments(checks, now: now)) { result in
            switch result {
            case .success(let reply):
                guard let decided = RateLimitScript.decisions(from: reply, limits: limits) else {
                    return completion(.failure(TakeFailure("unexpected rate-limit script reply")))
                }
                completion(.success(decided))
            case .failure(let error):
                completion(.failure(TakeFailure(error.description)))
            }
        }
    }

    /// Combines the per-slot replies; refunds what allowed groups took when the request is
    /// refused or a group could not be decided.
    private func settle(_ checks: [BucketCheck], _ groups: [[Int]],
                        _ replies: [(allowed: Bool, decisions: [TokenBucket.Decision])?],
                        failure: String?, fallback: RateLimitFallback, now: Int64) -> RateLimitOutcome {
        let allowed = failure == nil && replies.allSatisfy { $0?.allowed == true }
        if !allowed {
            for (group, reply) in zip(groups, replies) where reply?.allowed == true {
                for index in group { refund(checks[index], now: now) }
            }
        }
        if let failure {
            enterFallback(reason: failure)
            return fallbackOutcome(checks, fallback)
        }
        leaveFallback()
        var decisions = Array(repeating: TokenBucket.Decision(allowed: false, limit: 0, remaining: 0, resetAt: 0, retryAfter: 0),
                              count: checks.count)
        for (group, reply) in zip(groups, replies) {
            for (position, index) in group.enumerated() { decisions[index] = reply!.decisions[position] }
        }
        return .combining(checks, allowed: allowed, decisions)
    }

    private func refund(_ check: BucketCheck, now: Int64) {
        redis.evalScript(AdmissionScripts.refund, keys: [check.key], args: [String(now), String(check.limitPerMinute)]) { _ in }
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

/// A dictionary by `String` key that remembers the entry it last handed out or stored.
///
/// Every proxied request looks up its tenant's lease and device epoch by key (~45 bytes). A
/// worker's requests come in runs for one tenant, whose key is the same string object each
/// time (built once per snapshot), and comparing a string with itself is a pointer comparison,
/// where the dictionary hashes the whole key (~500 instructions for the two lookups). Any
/// other key costs one failed comparison more than the dictionary alone.
struct LastKeyed<Value> {
    private var entries: [String: Value] = [:]
    private var last: (key: String, value: Value)?

    subscript(key: String) -> Value? {
        mutating get {
            if let last, last.key == key { return last.value }
            guard let value = entries[key] else { return nil }
            last = (key, value)
            return value
        }
        set {
            entries[key] = newValue
            if let newValue {
                last = (key, newValue)
            } else if last?.key == key {
                last = nil
            }
        }
    }
}
