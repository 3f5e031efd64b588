import AGEventLoop
import AGFormats
import AGRedis

/// What one worker has heard about revoked devices, from the `ag:{cfg}:events` stream.
///
/// Not what keeps revoked tokens out: a revocation, an invalidation (and a Redis that
/// restarted empty) moves the tenant's device epoch, which every worker reads with each `api`
/// lease, and a token checked at an older epoch has its device record read again
/// (`RateLimiter+Devices`), so every instance refuses within one lease lifetime (1 s) with
/// nothing to deliver and nothing to lose. This set is the fast path — a revocation heard here
/// is refused on this worker at once — and the fallback for Redis unreachable with
/// `proxy.unverified_token_policy: allow`: a device revoked before Redis went away is still
/// refused then — also by a worker started after the revocation, since the stream is read
/// from `retention` back when the watcher starts (an independent sweep saw an instance
/// restarted after a revocation proxy the revoked device's token during an outage). Entries
/// are dropped once every token of the device that predates the revocation has expired
/// (`retention`). Loop thread only.
final class RevocationWatcher: RevocationState {
    private var revoked: [String: ContinuousClock.Instant] = [:]
    private var reader: EventStreamReader?

    /// Reads the events stream on its own connection to `url`; `retention` gives the current
    /// longest token lifetime plus leeway, read when entries are pruned.
    init(url: RedisURL, loop: EventLoop, timeout: Duration, logger: any LogSink, retention: @escaping () -> Duration) {
        reader = EventStreamReader(url: url, loop: loop, timeout: timeout, history: retention, onEvents: { [weak self] entries in
            guard let self else { return }
            self.prune(olderThan: retention())
            for entry in entries {
                guard let event = Self.deviceEvent(in: entry.json) else { continue }
                if event.revoked {
                    self.markRevoked(appID: event.appID, keyID: event.keyID)
                } else {
                    self.revoked[Self.key(event.appID, event.keyID)] = nil
                }
                logger.debug(event.revoked ? "revocation received" : "device key restored", [("tenant", .string(event.appID))])
            }
        }, onResume: {})
    }

    /// Whether the device `keyID` of `appID` is known to be revoked.
    func isRevoked(appID: String, keyID: String) -> Bool {
        !revoked.isEmpty && revoked[Self.key(appID, keyID)] != nil
    }

    func markRevoked(appID: String, keyID: String) {
        revoked[Self.key(appID, keyID)] = .now
    }

    /// Stops reading; must run on the loop before its `event_base` goes away.
    func close() {
        reader?.close()
        reader = nil
    }

    private func prune(olderThan retention: Duration) {
        let cutoff = ContinuousClock.now - retention
        revoked = revoked.filter { $0.value > cutoff }
    }

    private static func key(_ appID: String, _ keyID: String) -> String {
        appID + " " + keyID
    }

    /// The device a `revoke` event (or a `restore` event: the key was imported again) names;
    /// other event types are not this watcher's business.
    static func deviceEvent(in payload: [UInt8]) -> (appID: String, keyID: String, revoked: Bool)? {
        guard case .object(let event)? = try? JSONValue(parsing: payload), let type = event["type"]?.stringValue,
              type == "revoke" || type == "restore",
              let appID = event["appId"]?.stringValue, let keyID = event["keyId"]?.stringValue else { return nil }
        return (appID, keyID, type == "revoke")
    }
}
