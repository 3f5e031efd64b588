import AGCrypto
import AGEventLoop
import AGFormats
import AGPolicy
import AGRedis

/// Notices a Redis that came back empty, from the control loop: reads the store epoch on every
/// (re)connect of its own connection and every `interval`, and reports a changed epoch loudly —
/// an error log line, `attestgate_store_resets_total`, and a `store_reset` warning in `/readyz`
/// until acknowledged (`POST /admin/v1/store/acknowledge-reset`).
///
/// A reconnect alone proves nothing (Redis may have kept its data through a restart with AOF);
/// the epoch is what tells. Loop thread only: create, use and close it on `loop`.
final class StoreEpochWatch {
    /// What a Redis without its data has lost (for the log line; the README has the details).
    static let lost = "device records and revocations, challenges, rate-limit buckets, monthly active device counts, "
        + "subscriptions, runtime tier overrides"

    private let redis: RedisClient
    private let epoch: StoreEpoch
    private let time: any TimeSource
    private let logger: any LogSink
    private let metrics: MetricsRegistry
    private var timer: EventTimer?
    private var inFlight = false

    init(loop: EventLoop, url: RedisURL, timeout: Duration, interval: Duration = .seconds(5), epoch: StoreEpoch,
         time: any TimeSource, logger: any LogSink, metrics: MetricsRegistry) {
        self.epoch = epoch
        self.time = time
        self.logger = logger
        self.metrics = metrics
        redis = RedisClient(url: url, loop: loop, timeout: timeout)
        redis.onStateChange = { [unowned self] state in
            if state == .connected { check(afterReconnect: true) }
        }
        let timer = EventTimer(loop: loop) { [unowned self] in
            check(afterReconnect: false)
            self.timer?.arm(after: interval)
        }
        timer.arm(after: interval)
        self.timer = timer
    }

    /// Reads (or, in an empty Redis, writes) the epoch now. Checks never overlap.
    func check(afterReconnect: Bool) {
        guard !inFlight, redis.isConnected else { return }
        inFlight = true
        let proposed = Base64.encodeURL(SecureRandom.bytes(count: 16))
        redis.evalScript(StoreEpochScript.script, keys: [StoreEpochScript.key],
                         args: [String(time.nowMicroseconds), proposed]) { [weak self] result in
            guard let self else { return }
            inFlight = false
            guard case .success(let value) = result, let reply = value.array, reply.count == 2,
                  let created = reply[0].int, let current = reply[1].string else {
                // Unreachable or slow: the next reconnect or tick checks again.
                return
            }
            report(epoch.observe(current, created: created == 1, nowMilliseconds: time.nowMilliseconds),
                   afterReconnect: afterReconnect)
        }
    }

    private func report(_ observation: StoreEpoch.Observation, afterReconnect: Bool) {
        switch observation {
        case .first(created: false):
            break
        case .unchanged:
            if afterReconnect { logger.debug("store epoch unchanged after reconnect", []) }
        case .first(created: true):
            logger.warn("redis held no store epoch: a new Redis, or one that lost its data before this instance started",
                        [("key", .string(StoreEpochScript.key)), ("lost", .string(Self.lost))])
        case .reset:
            metrics.increment(MetricsRegistry.storeResets)
            logger.error("redis came back empty: the store epoch changed, its data is gone", [
                ("key", .string(StoreEpochScript.key)), ("lost", .string(Self.lost)),
                ("hint", .string("enable appendonly in Redis; devices must attest again; acknowledge with POST /admin/v1/store/acknowledge-reset")),
            ])
        }
    }

    /// Must run on the loop before it stops.
    func close() {
        timer?.cancel()
        timer = nil
        redis.close()
    }
}
