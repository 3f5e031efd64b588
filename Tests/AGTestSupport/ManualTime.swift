import AGPolicy
import Synchronization

/// A `TimeSource` that moves only when a test says so: tests advance it past a grace period,
/// an expiry or a bucket refill instead of sleeping.
public final class ManualTime: TimeSource {
    private let now: Atomic<Int64>

    /// Starts at `microseconds` (Unix µs; the host clock's now by default).
    public init(microseconds: Int64 = SystemTime().nowMicroseconds) {
        now = Atomic(microseconds)
    }

    public var nowMicroseconds: Int64 { now.load(ordering: .relaxed) }

    /// Moves time forward by `duration`.
    public func advance(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        now.add(seconds * 1_000_000 + attoseconds / 1_000_000_000_000, ordering: .relaxed)
    }

    /// Sets the time to `microseconds` (Unix µs).
    public func set(microseconds: Int64) {
        now.store(microseconds, ordering: .relaxed)
    }
}
