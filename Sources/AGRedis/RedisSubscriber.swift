public import AGEventLoop

/// A message received on a subscribed channel.
public struct RedisMessage: Sendable, Hashable {
    public let channel: String
    public let payload: [UInt8]

    public init(channel: String, payload: [UInt8]) {
        self.channel = channel
        self.payload = payload
    }

    /// The payload decoded as UTF-8.
    public var string: String { String(decoding: payload, as: UTF8.self) }
}

/// A dedicated Pub/Sub connection that stays subscribed to `channels` across reconnects,
/// whatever the URL's topology: one server; any node of a cluster (Pub/Sub messages reach
/// every node), the seeds tried in turn; or the current primary of a Sentinel set.
///
/// Messages published while it is disconnected are lost (Pub/Sub has no backlog): when
/// `onStateChange` reports `.connected` again, re-read whatever state the messages announce.
/// The connection's health is checked every `timeout` by a repeated `SUBSCRIBE` that must be
/// confirmed within `timeout`. Same threading rules as `RedisClient`.
public final class RedisSubscriber {
    public let url: RedisURL
    public var onStateChange: ((RedisConnectionState) -> Void)?
    private let backend: any SubscriberBackend

    /// Connects and subscribes at once; `onMessage` runs on the loop thread.
    public init(url: RedisURL, loop: EventLoop, channels: [String], timeout: Duration = .seconds(1),
                reconnectPolicy: RedisReconnectPolicy = .default, resolver: DNSResolver? = nil,
                onMessage: @escaping (RedisMessage) -> Void) {
        precondition(!channels.isEmpty, "a subscriber needs at least one channel")
        var unique: [String] = []
        for channel in channels where !unique.contains(channel) { unique.append(channel) }
        self.url = url
        let settings = ConnectionSettings(url: url, timeout: timeout, reconnectPolicy: reconnectPolicy)
        let role = RedisConnection.Role.subscriber(channels: unique, onMessage: onMessage)
        let resolver = resolver ?? loop.resolver
        switch url.topology {
        case .standalone(let endpoint):
            backend = RedisConnection(targets: [endpoint], settings: settings, role: role, loop: loop, resolver: resolver)
        case .cluster(let seeds):
            backend = RedisConnection(targets: seeds, settings: settings, role: role, loop: loop, resolver: resolver)
        case .sentinel(let sentinels, let masterName):
            backend = SentinelBackend(sentinels: sentinels, masterName: masterName, settings: settings, role: role,
                                      loop: loop, resolver: resolver)
        }
        backend.onStateChange = { [unowned self] state in onStateChange?(state) }
    }

    deinit {
        // The backend's callback reaches this object through an unowned reference, which
        // traps once deinit has begun: it is cut before closing makes the backend report.
        onStateChange = nil
        backend.onStateChange = nil
        backend.close()
    }

    /// `.connected` once every channel's subscription is confirmed.
    public var state: RedisConnectionState { backend.state }
    public var isSubscribed: Bool { state == .connected }
    public var lastError: String? { backend.lastError }

    /// Unsubscribes by disconnecting for good. Must run before the `event_base` is freed.
    public func close() {
        backend.close()
    }
}

/// A subscriber's connection: direct, or following a Sentinel-managed primary.
protocol SubscriberBackend: AnyObject {
    var state: RedisConnectionState { get }
    var lastError: String? { get }
    var onStateChange: ((RedisConnectionState) -> Void)? { get set }
    func close()
}

extension RedisConnection: SubscriberBackend {}
extension SentinelBackend: SubscriberBackend {}
