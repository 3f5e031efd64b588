#if canImport(Glibc)
import Glibc
#endif
import AGConfig

/// A token bucket sized in tokens per minute: capacity = limit, refill = limit / 60 per second.
///
/// The maths is fixed-point so it can be repeated exactly in Redis Lua (whose numbers are
/// doubles): one token is `unitsPerToken` units and one microsecond refills `limitPerMinute`
/// units, so every quantity is an integer far below 2^53. `RateLimitScript` runs the same steps,
/// in the same order, against Redis `TIME`.
public struct TokenBucket: Sendable, Hashable {
    /// Units in one token: the microseconds in a minute, so refill per µs equals the limit.
    public static let unitsPerToken: Int64 = 60_000_000
    /// The largest limit for which every intermediate value stays an exact double in Lua.
    public static let maximumLimitPerMinute = RateTier.maximumLimitPerMinute

    /// The limit the bucket was last refilled with.
    public private(set) var limitPerMinute: Int
    /// Tokens held, in units (fractional tokens included).
    public private(set) var units: Int64
    /// Unix time in microseconds of the last refill; never moves backwards.
    public private(set) var updatedAt: Int64

    /// What one `take` decided, in the terms the rate-limit headers use.
    public struct Decision: Sendable, Hashable {
        /// Whether a token was (or, for a bucket checked with others, could be) taken.
        public let allowed: Bool
        /// Limit per minute (`X-RateLimit-Limit`).
        public let limit: Int
        /// Whole tokens left after this decision (`X-RateLimit-Remaining`).
        public let remaining: Int
        /// Unix seconds, rounded up, when the bucket is full again (`X-RateLimit-Reset`).
        public let resetAt: Int64
        /// For a refused take: seconds, rounded up and at least 1, until a token is available
        /// (`Retry-After`). 0 otherwise.
        public let retryAfter: Int

        public init(allowed: Bool, limit: Int, remaining: Int, resetAt: Int64, retryAfter: Int) {
            self.allowed = allowed
            self.limit = limit
            self.remaining = remaining
            self.resetAt = resetAt
            self.retryAfter = retryAfter
        }
    }

    /// A full bucket, as a bucket nobody has used yet is.
    public init(limitPerMinute: Int, now: Int64) {
        let limit = Self.clampedLimit(limitPerMinute)
        self.limitPerMinute = limit
        self.units = Int64(limit) * Self.unitsPerToken
        self.updatedAt = now
    }

    /// A bucket restored from stored state.
    public init(limitPerMinute: Int, units: Int64, updatedAt: Int64) {
        self.limitPerMinute = Self.clampedLimit(limitPerMinute)
        self.units = max(0, units)
        self.updatedAt = updatedAt
    }

    public var capacityUnits: Int64 { Int64(limitPerMinute) * Self.unitsPerToken }

    /// Tokens held, with their fraction.
    public var tokens: Double { Double(units) / Double(Self.unitsPerToken) }

    /// Whether a token can be taken right now (after `refill`).
    public var hasToken: Bool { units >= Self.unitsPerToken }

    /// Takes one token if there is one, after refilling to `now` under `limitPerMinute`.
    ///
    /// A refused take leaves the bucket as it was (the script writes nothing either), so a
    /// rate-limited request changes no state.
    public mutating func take(now: Int64, limitPerMinute: Int) -> Decision {
        var next = self
        next.refill(now: now, limitPerMinute: limitPerMinute)
        guard next.hasToken else { return next.decision(allowed: false) }
        next.consume()
        self = next
        return next.decision(allowed: true)
    }

    /// Takes as many tokens as there are, up to `count` (a lease for local spending), after
    /// refilling to `now` under `limitPerMinute`. `granted` is 0 when the bucket holds no whole
    /// token, and then the bucket is left as it was; the decision is allowed when any was granted.
    public mutating func take(upTo count: Int, now: Int64, limitPerMinute: Int) -> (granted: Int, decision: Decision) {
        var next = self
        next.refill(now: now, limitPerMinute: limitPerMinute)
        let granted = Int(min(Int64(max(1, count)), next.units / Self.unitsPerToken))
        guard granted > 0 else { return (0, next.decision(allowed: false)) }
        next.units -= Int64(granted) * Self.unitsPerToken
        self = next
        return (granted, next.decision(allowed: true))
    }

    /// Takes one token under the current limit.
    public mutating func take(now: Int64) -> Decision {
        take(now: now, limitPerMinute: limitPerMinute)
    }

    /// Adds what the time since the last refill earned, under the limit in force now.
    ///
    /// A clock that went backwards counts as no elapsed time, and `updatedAt` keeps the later
    /// time so the same interval is never credited twice. A new limit clamps the tokens to
    /// the new capacity.
    public mutating func refill(now: Int64, limitPerMinute newLimit: Int) {
        limitPerMinute = Self.clampedLimit(newLimit)
        // Nothing needs more than a minute to fill, so capping here keeps the product small.
        let elapsed = min(max(0, now - updatedAt), Self.unitsPerToken)
        units = min(capacityUnits, units + elapsed * Int64(limitPerMinute))
        updatedAt = max(updatedAt, now)
    }

    /// Removes one token; call only when `hasToken`.
    public mutating func consume() {
        precondition(hasToken, "consume() on an empty bucket")
        units -= Self.unitsPerToken
    }

    /// The bucket's state as of `updatedAt`, as headers describe it; `allowed` is the verdict
    /// for the request (a denied one gets a `retryAfter`).
    public func decision(allowed: Bool) -> Decision {
        let limit = Int64(limitPerMinute)
        let microsToFull = Self.divideRoundingUp(capacityUnits - units, limit)
        let resetAt = Self.divideRoundingUp(updatedAt + microsToFull, 1_000_000)
        var retryAfter = 0
        if !allowed {
            let microsToToken = Self.divideRoundingUp(Self.unitsPerToken - units, limit)
            retryAfter = Int(max(1, Self.divideRoundingUp(microsToToken, 1_000_000)))
        }
        return Decision(allowed: allowed, limit: limitPerMinute, remaining: Int(units / Self.unitsPerToken),
                        resetAt: resetAt, retryAfter: retryAfter)
    }

    /// The wall clock as Unix microseconds (the local fallback's clock).
    public static func wallClockMicroseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
    }

    public static func clampedLimit(_ limit: Int) -> Int {
        min(max(1, limit), maximumLimitPerMinute)
    }

    /// `ceil(a / b)` for `a >= 0`, `b > 0`.
    private static func divideRoundingUp(_ a: Int64, _ b: Int64) -> Int64 {
        (a + b - 1) / b
    }
}

extension TokenBucket {
    /// Takes one token from every bucket, or from none when any is empty: the all-or-nothing
    /// rule `RateLimitScript` applies to several keys. A refusal leaves every bucket as it was.
    /// Decisions come back in bucket order; each says whether its own bucket had a token.
    public static func takeAll(_ buckets: inout [TokenBucket], now: Int64, limits: [Int]) -> (allowed: Bool, decisions: [Decision]) {
        precondition(buckets.count == limits.count, "one limit per bucket")
        var next = buckets
        for index in next.indices {
            next[index].refill(now: now, limitPerMinute: limits[index])
        }
        guard next.allSatisfy(\.hasToken) else {
            return (false, next.map { $0.decision(allowed: $0.hasToken) })
        }
        for index in next.indices {
            next[index].consume()
        }
        buckets = next
        return (true, next.map { $0.decision(allowed: true) })
    }
}
