import AGEventLoop
import AGPolicy
import AGRedis

/// Keeps an `AlignedTime` on the Redis clock, from the control loop: `TIME` on connect and every
/// `interval`, the offset taken at the midpoint of the round trip (a measurement whose round
/// trip took over `AlignedTime.maximumRoundTrip` is ignored).
///
/// Every script gets "now" from the gateway, so instances whose clocks disagree would otherwise
/// disagree on challenge expiry and bucket refills; measured against the one Redis clock they
/// agree to within half a round trip. Until the first answer the host clock is used as is.
/// The correction is bounded (`AlignedTime.maximumOffset`); an offset over `warningOffset`
/// means a clock is wrong and is logged once when it appears (and again when it has moved by
/// another `warningOffset`), and once when it is gone. Loop thread only.
final class RedisClockAlignment {
    /// Offsets beyond this are logged (1 s, µs).
    static let warningOffset: Int64 = 1_000_000
    private let redis: RedisClient
    private let time: AlignedTime
    private let logger: Logger
    private var timer: EventTimer?
    private var inFlight = false
    /// The offset last logged as too large, while it is.
    private var reportedOffset: Int64?

    init(loop: EventLoop, url: RedisURL, time: AlignedTime, timeout: Duration, logger: Logger, interval: Duration = .seconds(5)) {
        self.time = time
        self.logger = logger
        redis = RedisClient(url: url, loop: loop, timeout: timeout)
        redis.onStateChange = { [unowned self] state in
            if state == .connected { measure() }
        }
        let timer = EventTimer(loop: loop) { [unowned self] in
            measure()
            self.timer?.arm(after: interval)
        }
        timer.arm(after: interval)
        self.timer = timer
    }

    private func measure() {
        guard !inFlight, redis.isConnected else { return }
        inFlight = true
        let sent = SystemTime().nowMicroseconds
        redis.send(["TIME"]) { [weak self] result in
            guard let self else { return }
            inFlight = false
            let received = SystemTime().nowMicroseconds
            guard case .success(let value) = result, let parts = value.array, parts.count == 2,
                  let seconds = parts[0].string.flatMap({ Int64($0) }), let micros = parts[1].string.flatMap({ Int64($0) }) else {
                return
            }
            guard let offset = time.record(reference: seconds * 1_000_000 + micros, sent: sent, received: received) else {
                return logger.debug("clock measurement ignored: its round trip was too long",
                                    [("round_trip_ms", .int(Int((received - sent) / 1000)))])
            }
            report(offset)
        }
    }

    private func report(_ offset: Int64) {
        let applied = min(max(offset, -AlignedTime.maximumOffset), AlignedTime.maximumOffset)
        if abs(offset) > Self.warningOffset {
            if let reported = reportedOffset, abs(offset - reported) < Self.warningOffset { return }
            reportedOffset = offset
            logger.warn("clock differs from Redis: check NTP on this host and on the Redis server", [
                ("offset_ms", .int(Int(offset / 1000))), ("applied_ms", .int(Int(applied / 1000))),
                ("max_applied_ms", .int(Int(AlignedTime.maximumOffset / 1000))),
            ])
        } else if reportedOffset != nil {
            reportedOffset = nil
            logger.info("clock back in line with Redis", [("offset_ms", .int(Int(offset / 1000)))])
        }
    }

    /// Must run on the loop before it stops.
    func close() {
        timer?.cancel()
        timer = nil
        redis.close()
    }
}
