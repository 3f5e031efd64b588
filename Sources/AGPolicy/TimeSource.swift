import AGFormats
import Synchronization

/// Where every decision reads the time: Unix microseconds.
///
/// The gateway passes it into every Lua script (none reads Redis `TIME` itself), into token
/// issuing and checking and into the monthly-active-device month, so tests can fix or advance
/// the time instead of sleeping. In production it is `AlignedTime`: this host's clock corrected
/// by its measured offset from the Redis clock, so instances whose clocks disagree still share
/// one timeline.
///
/// Class-bound: reading the time through an `any TimeSource` copied the existential (and
/// destroyed the copy) on every read, several per request; a class reference is retained.
public protocol TimeSource: AnyObject, Sendable {
    /// Unix time in microseconds.
    var nowMicroseconds: Int64 { get }
}

extension TimeSource {
    /// Unix time in whole milliseconds.
    public var nowMilliseconds: Int64 { nowMicroseconds / 1000 }
    /// Unix time in seconds, with a fraction.
    public var nowSeconds: Double { Double(nowMicroseconds) / 1_000_000 }
    /// The UTC calendar fields of now.
    public var nowUTC: UTCDateTime { UTCDateTime(unixMilliseconds: nowMilliseconds) }
}

/// This host's clock, unadjusted.
public final class SystemTime: TimeSource {
    public init() {}

    public var nowMicroseconds: Int64 { TokenBucket.wallClockMicroseconds() }
}

/// This host's clock plus an offset to a reference clock (Redis `TIME`), kept current by
/// whoever measures it. Until the first measurement the offset is zero.
///
/// The offset applied is at most `maximumOffset` either way. Clocks kept by NTP agree within
/// milliseconds; a larger offset means one of the two clocks is wrong, and which one cannot be
/// told from here. Followed without bound, a Redis clock years off dated every token and checked
/// every App Attest certificate at that date (an independent sweep, stop 32, moved only the
/// `TIME` reply six years back: the gateway issued tokens dated 2020 and accepted certificates
/// that had expired then). Within the bound instances still share one timeline.
public final class AlignedTime: TimeSource {
    private let offset = Atomic<Int64>(0)
    private let measured = Atomic<Bool>(false)

    public init() {}

    public var nowMicroseconds: Int64 {
        TokenBucket.wallClockMicroseconds() + offset.load(ordering: .relaxed)
    }

    /// The offset in use (reference minus local, µs), and whether it was ever measured.
    public var currentOffset: (microseconds: Int64, measured: Bool) {
        (offset.load(ordering: .relaxed), measured.load(ordering: .relaxed))
    }

    /// The most the host clock is corrected by, either way (10 s, µs): within the usual token
    /// leeway (`tokens.leeway` 30 s) of whoever checks the tokens against their own clock.
    public static let maximumOffset: Int64 = 10_000_000

    /// The longest round trip a measurement may take (250 ms, µs): its error is up to half of
    /// it, and a long one says more about a stalled server than about its clock (an
    /// independent sweep saw `TIME` answered at the end of a `DEBUG SLEEP` move the gateway's
    /// now 1.5 s ahead of both clocks, the same host's, for a measurement interval).
    public static let maximumRoundTrip: Int64 = 250_000

    /// Records a measurement: the reference read `reference` while the local clock went from
    /// `sent` to `received` (all Unix µs); the midpoint of the round trip is taken as the
    /// moment the reference was read. Returns the measured offset (µs), which is applied only
    /// up to `maximumOffset` — or nil, changing nothing, for a round trip over
    /// `maximumRoundTrip` (or a local clock that went back meanwhile).
    @discardableResult
    public func record(reference: Int64, sent: Int64, received: Int64) -> Int64? {
        guard received >= sent, received - sent <= Self.maximumRoundTrip else { return nil }
        let measuredOffset = reference - (sent + (received - sent) / 2)
        offset.store(min(max(measuredOffset, -Self.maximumOffset), Self.maximumOffset), ordering: .relaxed)
        measured.store(true, ordering: .relaxed)
        return measuredOffset
    }
}
