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

/// A dedicated Pub/Sub connection that stays subscribed to `channels` across reconnects.
///
/// Messages published while it is disconnected are lost (Pub/Sub has no backlog): when
/// `onStateChange` reports `.connected` again, re-read whatever state the messages announce.
/// Same threading rules as `RedisClient`.
public final class RedisSubscriber {
    private let connection: RedisClient

    /// Connects and subscribes at once; `onMessage` runs on the loop thread.
    public init(url: RedisURL, loop: EventLoop, channels: [String], timeout: Duration = .seconds(1),
                reconnectPolicy: RedisReconnectPolicy = .default, onMessage: @escaping (RedisMessage) -> Void) {
        precondition(!channels.isEmpty, "a subscriber needs at least one channel")
        var unique: [String] = []
        for channel in channels where !unique.contains(channel) { unique.append(channel) }
        connection = RedisClient(url: url, loop: loop, timeout: timeout, reconnectPolicy: reconnectPolicy,
                                 subscription: .init(channels: unique, onMessage: onMessage))
    }

    public var url: RedisURL { connection.url }
    /// `.connected` once every channel's subscription is confirmed.
    public var state: RedisConnectionState { connection.state }
    public var isSubscribed: Bool { connection.isConnected }
    public var lastError: String? { connection.lastError }

    public var onStateChange: ((RedisConnectionState) -> Void)? {
        get { connection.onStateChange }
        set { connection.onStateChange = newValue }
    }

    /// Unsubscribes by disconnecting for good. Must run before the `event_base` is freed.
    public func close() {
        connection.close()
    }
}
