import AGEventLoop
import AGHTTP
import AGRedis

/// Keeps an instance's `TierStore` in step with Redis, on the control loop.
///
/// Three paths, so a change made through any instance applies everywhere within a second:
/// - every tier event on the `ag:{cfg}:events` stream is applied at once and followed by a full
///   re-read; the stream is read from the last id seen, so a dropped or frozen connection only
///   delays events (`EventStreamReader`);
/// - each time the stream reader (re)connects, and each time the command connection does, both
///   hashes are re-read, which catches anything the stream no longer holds;
/// - a re-read every `pollInterval` (one small script call), a safety net for changes written to
///   Redis by hand, without an event.
///
/// Re-reads never overlap, and a re-read that an event or a change applied by this instance's
/// workers overtook is discarded and repeated, so an older snapshot never replaces a newer
/// change. Loop-thread only: create, use and close it
/// on `loop`.
public final class TierSync {
    private let store: TierStore
    private let logger: Logger
    private let redis: RedisClient
    private var reader: EventStreamReader?
    private var migrated = false
    private var pollTimer: EventTimer?
    private var reloadInFlight = false
    private var reloadAgain = false
    private var failing = false
    /// Invalid entries already logged, so a poll does not repeat them every second.
    private var lastIgnored: [String] = []
    private var closed = false

    /// Called on the loop after every successful re-read (tests and metrics).
    public var onReload: (() -> Void)?

    /// Connects a command connection and a stream reader to `redisURL` and reads the overrides
    /// as soon as either is up (after moving hashes an older version wrote under their
    /// pre-cluster names). `pollInterval` nil turns the polling safety net off.
    public init(loop: EventLoop, redisURL: RedisURL, store: TierStore, logger: Logger, timeout: Duration = .seconds(1),
                pollInterval: Duration? = .seconds(1)) {
        self.store = store
        self.logger = logger
        redis = RedisClient(url: redisURL, loop: loop, timeout: timeout)
        redis.onStateChange = { [unowned self] state in
            if state == .connected { reload() }
        }
        reader = EventStreamReader(url: redisURL, loop: loop, timeout: timeout, onEvents: { [unowned self] entries in
            received(entries)
        }, onResume: { [unowned self] in
            reload()
        })
        if let pollInterval {
            let timer = EventTimer(loop: loop) { [unowned self] in
                reload()
                pollTimer?.arm(after: pollInterval)
            }
            timer.arm(after: pollInterval)
            pollTimer = timer
        }
    }

    /// Stops listening and polling. Must run before the loop's `event_base` is freed.
    public func close() {
        guard !closed else { return }
        closed = true
        pollTimer?.cancel()
        pollTimer = nil
        reader?.close()
        reader = nil
        redis.close()
    }

    private func received(_ entries: [EventStreamReader.Entry]) {
        let events = entries.compactMap { TierStore.Event(json: $0.json) }
        guard !events.isEmpty else { return }
        for event in events { store.apply(event: event) }
        reload()
    }

    /// Re-reads both hashes; when a re-read is already on its way, its answer may predate what
    /// triggered this one, so it is dropped and the read repeated.
    private func reload() {
        guard !closed else { return }
        guard !reloadInFlight else {
            reloadAgain = true
            return
        }
        reloadInFlight = true
        reloadAgain = false
        guard migrated else {
            TierStore.migrateLegacyKeys(on: redis) { [weak self] answered in
                guard let self, !closed else { return }
                reloadInFlight = false
                // Not answered: Redis is down; the next (re)connect tries again.
                guard answered else { return }
                migrated = true
                reload()
            }
            return
        }
        let version = store.version
        TierStore.fetch(from: redis) { [weak self] result in
            guard let self, !closed else { return }
            reloadInFlight = false
            if reloadAgain {
                reload()
                return
            }
            switch result {
            case .success(let fetched):
                // Overtaken by a change applied meanwhile (an admin call on a worker): read again.
                guard store.replace(fetched.overrides, unlessChangedSince: version) else {
                    reload()
                    return
                }
                if fetched.ignored != lastIgnored {
                    lastIgnored = fetched.ignored
                    for problem in fetched.ignored {
                        logger.warn("ignoring invalid runtime tier override", [("problem", .string(problem))])
                    }
                }
                if failing {
                    failing = false
                    logger.info("runtime tier overrides readable again", [])
                }
                onReload?()
            case .failure(let error):
                if !failing {
                    failing = true
                    logger.warn("cannot read runtime tier overrides, keeping the last ones",
                                [("reason", .string(error.description))])
                }
            }
        }
    }
}
