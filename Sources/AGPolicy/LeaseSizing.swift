/// How many `api` tokens a worker takes from its tenant's Redis bucket at once, to spend
/// locally without a round trip per proxied request.
///
/// Every leased token was taken from the shared bucket first, so the instances together never
/// admit more than the bucket holds: leasing cannot over-admit. What it can do is hold tokens a
/// worker ends up not using; they lapse with the lease (`lifetime`), so at most
/// `instances × workers × batch` tokens per lifetime go unspent (under-admission), and the
/// batch shrinks to 1 near the limit so that tail is small when it matters.
public enum LeaseSizing {
    /// The largest lease.
    public static let maximumBatch = 64
    /// How long leased tokens may be spent; unspent ones lapse (µs).
    public static let lifetimeMicroseconds: Int64 = 1_000_000

    /// The size of the next lease of a bucket of `limitPerMinute` tokens per minute, whose last
    /// lease left `remaining` whole tokens in Redis, after `demand` requests were seen on this
    /// worker during the last lease: enough for the observed rate, never more than one second's
    /// refill, never more than an eighth of what is left.
    public static func batch(limitPerMinute: Int, remaining: Int, demand: Int) -> Int {
        let perSecond = max(1, limitPerMinute / 60)
        let wanted = min(maximumBatch, perSecond, max(1, demand))
        return max(1, min(wanted, remaining / 8))
    }
}
