internal import AGFormats
#if canImport(Glibc)
import Glibc
#endif

/// The `Date` field of a server's answers (RFC 9110 section 6.6.1: an origin with a clock sends
/// one, and a proxy adds one to a forwarded response that lacks it), as the IMF-fixdate bytes
/// of the current second: formatted once per second per server, and each worker has its own
/// server, so answers copy 29 bytes and take no lock (nginx's cached `ngx_cached_http_time`).
struct DateFieldCache {
    private var cachedSecond = Int64.min
    private var text: [UInt8] = []

    /// Appends `Date: <IMF-fixdate>\r\n` for `unixSeconds`, formatting only when the second
    /// differs from the last one asked.
    mutating func appendField(at unixSeconds: Int64, to writer: inout HTTPHeadWriter) {
        refresh(unixSeconds)
        writer.appendFieldName(.date)
        writer.append(text)
        writer.appendCRLF()
    }

    /// The IMF-fixdate of `unixSeconds` (cached for the second).
    mutating func value(at unixSeconds: Int64) -> [UInt8] {
        refresh(unixSeconds)
        return text
    }

    /// How many times a value was formatted (for the cache's test).
    private(set) var formatted = 0

    private mutating func refresh(_ unixSeconds: Int64) {
        guard unixSeconds != cachedSecond else { return }
        text.removeAll(keepingCapacity: true)
        UTCDateTime(unixSeconds: unixSeconds).writeIMFFixdate(to: &text)
        cachedSecond = unixSeconds
        formatted += 1
    }

    /// The wall clock's second, from the coarse clock the vDSO reads without a system call
    /// (a tick or so behind, which a one-second field does not see).
    static func currentSecond() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return Int64(time.tv_sec)
    }
}
