import AGConfig
import AGPolicy
import AGEventLoop
import AGFormats
import AGRedis

/// What one worker knows about revoked devices, kept current from Redis.
///
/// How a revocation reaches proxied calls within a second on every instance, while the hot
/// path stays one dictionary lookup:
/// - The admin revoke sets `rev` = 1 and publishes `{"type":"revoke","appId","keyId"}` on
///   `ag:events` in one script. Each worker holds its own subscription on its own loop and
///   records the device here; every proxied request checks this set, cached token or not.
///   One subscriber per worker (not one per instance shared under a lock) keeps the request
///   path free of locks, at the price of one extra Redis connection per worker.
/// - Pub/Sub has no backlog, so a token seen for the first time on this worker is checked
///   once against Redis (`HGET … rev`: one round trip per new token, none for cached ones).
/// - Messages published while the subscription was down are lost: every (re)connect bumps
///   `epoch`, and a cached token checked under an older epoch is checked against Redis again
///   on its next use.
/// - When Redis cannot answer that check the request goes through (proxied traffic fails
///   open, like its rate limit) and the token stays unchecked, so the next use asks again.
///
/// Entries are dropped once every token of the device that predates the revocation has
/// expired (`retention`). Loop thread only.
final class RevocationWatcher: RevocationState {
    private var revoked: [String: ContinuousClock.Instant] = [:]
    /// The worker's command connection, for the one-off checks of tokens not seen yet.
    private let redis: RedisClient
    /// Increases whenever the subscription (re)connects; see the type's comment.
    private(set) var epoch = 0
    private var subscriber: RedisSubscriber?

    /// Subscribes to `channel` on `loop`; `retention` gives the current longest token lifetime
    /// plus leeway, read when entries are pruned. `redis` answers `checkStore`.
    init(url: RedisURL, loop: EventLoop, redis: RedisClient, channel: String, timeout: Duration, logger: any LogSink,
         retention: @escaping () -> Duration) {
        self.redis = redis
        let subscriber = RedisSubscriber(url: url, loop: loop, channels: [channel], timeout: timeout) {
            [weak self] message in
            guard let self, let event = Self.deviceEvent(in: message.payload) else { return }
            self.prune(olderThan: retention())
            if event.revoked {
                self.markRevoked(appID: event.appID, keyID: event.keyID)
            } else {
                self.revoked[Self.key(event.appID, event.keyID)] = nil
            }
            logger.debug(event.revoked ? "revocation received" : "device key restored", [("tenant", .string(event.appID))])
        }
        subscriber.onStateChange = { [weak self] state in
            if state == .connected { self?.epoch += 1 }
        }
        self.subscriber = subscriber
    }

    /// Whether the device `keyID` of `appID` is known to be revoked.
    func isRevoked(appID: String, keyID: String) -> Bool {
        !revoked.isEmpty && revoked[Self.key(appID, keyID)] != nil
    }

    func markRevoked(appID: String, keyID: String) {
        revoked[Self.key(appID, keyID)] = .now
    }

    func checkStore(tenant: Tenant, keyID: String, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        redis.send(["HGET", RedisDeviceStore.deviceKey(tenant, keyID), "rev"]) { result in
            completion(RedisDeviceStore.store(result).map { $0.string == "1" })
        }
    }

    /// Unsubscribes; must run on the loop before its `event_base` goes away.
    func close() {
        subscriber?.close()
        subscriber = nil
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
