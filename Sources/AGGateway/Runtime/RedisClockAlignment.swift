import AGConfig
import AGEventLoop
import AGPolicy
import AGRedis

/// Keeps an `AlignedTime` on the Redis clock, from the control loop: `TIME` on connect and every
/// `interval`, the offset taken at the midpoint of the round trip.
///
/// Every script gets "now" from the gateway, so instances whose clocks disagree would otherwise
/// disagree on challenge expiry and bucket refills; measured against the one Redis clock they
/// agree to within half a round trip. Until the first answer the host clock is used as is.
/// Loop thread only.
final class RedisClockAlignment {
    private let redis: RedisClient
    private let time: AlignedTime
    private var timer: EventTimer?
    private var inFlight = false

    init(loop: EventLoop, url: RedisURL, time: AlignedTime, timeout: Duration, interval: Duration = .seconds(5)) {
        self.time = time
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
            time.record(reference: seconds * 1_000_000 + micros, sent: sent, received: received)
        }
    }

    /// Must run on the loop before it stops.
    func close() {
        timer?.cancel()
        timer = nil
        redis.close()
    }
}
