import AGPolicy
import AGSync

/// In-process token buckets, one per key for the whole instance, used while Redis is
/// unreachable and `rate_limits.on_store_error` is `local`.
///
/// Shared by every worker's `RateLimiter` so the instance as a whole enforces each limit (per
/// instance, not per cluster). Bounded: past `capacity` keys the least recently used bucket is
/// dropped, which at worst hands that key a fresh, full bucket. The mutex is only taken in
/// fallback mode, never on the Redis path.
public final class LocalBuckets: Sendable {
    private let buckets: Locked<LRUCache<String, TokenBucket>>
    private let time: any TimeSource

    public init(capacity: Int = 100_000, time: any TimeSource) {
        buckets = Locked(LRUCache(capacity: capacity))
        self.time = time
    }

    /// Takes a token from every bucket in `checks`, or from none (see `TokenBucket.takeAll`).
    public func take(_ checks: [BucketCheck]) -> (allowed: Bool, decisions: [TokenBucket.Decision]) {
        let now = time.nowMicroseconds
        let limits = checks.map(\.limitPerMinute)
        return buckets.withLock { cache in
            var taken = checks.map { check in
                cache.value(for: check.key) ?? TokenBucket(limitPerMinute: check.limitPerMinute, now: now)
            }
            let result = TokenBucket.takeAll(&taken, now: now, limits: limits)
            for (check, bucket) in zip(checks, taken) {
                cache.set(bucket, for: check.key)
            }
            return result
        }
    }

    /// Keys currently held.
    public var count: Int {
        buckets.withLock { $0.count }
    }
}
