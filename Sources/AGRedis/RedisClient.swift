internal import CHiredis
internal import CShims
internal import Glibc
public import AGEventLoop

/// The connection's life cycle, reported to `RedisClient.onStateChange`.
public enum RedisConnectionState: Sendable, Hashable {
    /// Connecting or authenticating; commands are queued behind the handshake.
    case connecting
    /// Handshake done (and, for a subscriber, every channel confirmed).
    case connected
    /// Waiting to reconnect; commands fail with `.unavailable` at once.
    case disconnected
    /// `close()` was called.
    case closed
}

/// How long to wait between reconnect attempts: `initialDelay`, doubling up to `maximumDelay`.
public struct RedisReconnectPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(initialDelay: Duration, maximumDelay: Duration) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    public static let `default` = RedisReconnectPolicy(initialDelay: .milliseconds(50), maximumDelay: .seconds(2))
}

/// An async Redis client on one libevent `event_base`, built on hiredis's async API.
///
/// Confined to the thread that runs the loop: create, use and close it there. It never runs the
/// loop itself. Commands are pipelined; each gets the client's `timeout` as a deadline, which
/// hiredis lacks. After a disconnect the client reconnects with exponential backoff and replays
/// `AUTH`/`SELECT` before anything else. Completions run on the loop thread; when a command
/// cannot be sent at all (not connected) its completion runs before `send` returns.
/// hiredis resolves a host name with a blocking lookup on every connect: prefer IP literals
/// or unix sockets in production URLs.
public final class RedisClient {
    public let url: RedisURL
    public let timeout: Duration
    public let reconnectPolicy: RedisReconnectPolicy
    public private(set) var state: RedisConnectionState = .connecting
    /// Called on every state change, on the loop thread; the gateway feeds `/readyz` and metrics from it.
    public var onStateChange: ((RedisConnectionState) -> Void)?
    /// The reason the last connection attempt or connection ended, for logs.
    public private(set) var lastError: String?

    public var isConnected: Bool { state == .connected }

    private let loop: EventLoop
    private let ownerThread = pthread_self()
    private var context: HiredisContext?
    private var commands = CommandQueue()
    private var deadlineTimer: EventTimer?
    private var deadlineTimerArmed = false
    private var reconnectTimer: EventTimer?
    /// Subscriber connections only: a PING every `timeout`, since a subscriber otherwise never
    /// notices a server that stopped answering.
    private var healthCheckTimer: EventTimer?
    private var nextReconnectDelay: Duration
    private let subscription: Subscription?

    /// Channels and handler of a subscriber connection (see `RedisSubscriber`).
    struct Subscription {
        var channels: [String]
        var onMessage: (RedisMessage) -> Void
    }

    /// Starts connecting at once; call on `loop`'s thread.
    /// - Parameters:
    ///   - loop: the event loop the client lives on; it must outlive the client.
    ///   - timeout: deadline for every command, and for connect plus handshake.
    public convenience init(url: RedisURL, loop: EventLoop, timeout: Duration = .seconds(1),
                            reconnectPolicy: RedisReconnectPolicy = .default) {
        self.init(url: url, loop: loop, timeout: timeout, reconnectPolicy: reconnectPolicy, subscription: nil)
    }

    init(url: RedisURL, loop: EventLoop, timeout: Duration,
         reconnectPolicy: RedisReconnectPolicy, subscription: Subscription?) {
        self.url = url
        self.loop = loop
        self.timeout = timeout
        self.reconnectPolicy = reconnectPolicy
        self.nextReconnectDelay = reconnectPolicy.initialDelay
        self.subscription = subscription
        deadlineTimer = EventTimer(loop: loop) { [unowned self] in deadlineTimerFired() }
        reconnectTimer = EventTimer(loop: loop) { [unowned self] in reconnectTimerFired() }
        if subscription != nil {
            healthCheckTimer = EventTimer(loop: loop) { [unowned self] in healthCheckTimerFired() }
        }
        connect()
    }

    deinit {
        onStateChange = nil
        close()
    }

    /// Sends one command, e.g. `["SET", key, value]`. The completion runs exactly once.
    public func send(_ arguments: [String], completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        send(arguments: arguments.lazy.map(\.utf8), completion: completion)
    }

    /// Sends one command whose arguments are raw bytes. The completion runs exactly once.
    public func send(_ arguments: [[UInt8]], completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        send(arguments: arguments, completion: completion)
    }

    /// Disconnects for good: pending commands complete with `.unavailable`, no reconnect follows.
    /// Must run before the `event_base` is freed.
    public func close() {
        guard state != .closed else { return }
        assertOnLoopThread()
        deadlineTimer = nil
        reconnectTimer = nil
        healthCheckTimer = nil
        lastError = "client closed"
        let closing = context
        context = nil
        setState(.closed)
        closing?.free()
        commands.removeAll()
    }

    private func send<Args: Collection>(arguments: Args, completion: @escaping (Result<RedisValue, RedisError>) -> Void)
    where Args.Element: Collection<UInt8> {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        assertOnLoopThread()
        guard subscription == nil else {
            completion(.failure(.unavailable("a subscriber connection cannot send commands")))
            return
        }
        guard let context else {
            completion(.failure(.unavailable(lastError ?? "not connected")))
            return
        }
        send(arguments, on: context, completion: completion)
    }

    private func send<Args: Collection>(_ arguments: Args, on context: HiredisContext,
                                        completion: @escaping (Result<RedisValue, RedisError>) -> Void)
    where Args.Element: Collection<UInt8> {
        let command = PendingCommand(deadline: .now + timeout, completion: completion)
        guard context.send(arguments, command: command) else {
            completion(.failure(.unavailable(context.isFreeing ? context.errorMessage : "command rejected by hiredis")))
            return
        }
        track(command)
    }

    private func track(_ command: PendingCommand) {
        commands.append(command)
        armDeadlineTimer()
    }

    // MARK: Connection life cycle

    private func connect() {
        setState(.connecting)
        guard state == .connecting else { return }
        switch HiredisContext.connect(to: url.endpoint, loop: loop, owner: self) {
        case .failure(let error):
            connectionEnded(reason: error.reason)
        case .success(let newContext):
            context = newContext
            sendHandshake(on: newContext)
        }
    }

    /// `AUTH` and `SELECT` go out before any queued command; `PING` when neither is needed, so
    /// "connected" always means the server answered, and the deadline covers a hung connect.
    private func sendHandshake(on context: HiredisContext) {
        var steps: [[String]] = []
        if let password = url.password {
            steps.append(url.username.map { ["AUTH", $0, password] } ?? ["AUTH", password])
        }
        if url.database != 0 {
            steps.append(["SELECT", String(url.database)])
        }
        if steps.isEmpty {
            steps.append(["PING"])
        }
        context.handshakeRepliesLeft = steps.count
        for step in steps {
            send(step.lazy.map(\.utf8), on: context) { [weak self] result in
                self?.handshakeReplied(result, step: step[0], on: context)
            }
        }
    }

    private func handshakeReplied(_ result: Result<RedisValue, RedisError>, step: String, on context: HiredisContext) {
        guard context === self.context else { return }
        switch result {
        case .failure(let error):
            abandon(context, reason: "\(step) failed during connect: \(error.reason)")
        case .success:
            context.handshakeRepliesLeft -= 1
            guard context.handshakeRepliesLeft == 0 else { return }
            if let subscription {
                subscribe(subscription.channels, on: context)
            } else {
                connectionEstablished()
            }
        }
    }

    private func connectionEstablished() {
        nextReconnectDelay = reconnectPolicy.initialDelay
        lastError = nil
        armHealthCheck()
        setState(.connected)
    }

    private func armHealthCheck() {
        guard let healthCheckTimer else { return }
        healthCheckTimer.arm(after: timeout)
    }

    private func healthCheckTimerFired() {
        guard state == .connected, let context else { return }
        // In subscribed mode hiredis routes the ["pong", ""] reply to this command's callback.
        send(["PING"].lazy.map(\.utf8), on: context) { [weak self] result in
            if case .failure(.timeout) = result {
                self?.abandon(context, reason: "PING on subscriber connection timed out")
            }
        }
        armHealthCheck()
    }

    /// Drops a context hiredis still considers healthy (failed handshake, missed deadline).
    private func abandon(_ context: HiredisContext, reason: String) {
        guard context === self.context else { return }
        self.context = nil
        context.free()
        connectionEnded(reason: reason)
    }

    /// hiredis reports that `context` failed to connect or disconnected.
    func contextLost(_ context: HiredisContext, reason: String) {
        guard context === self.context else { return }
        self.context = nil
        connectionEnded(reason: reason)
    }

    private func connectionEnded(reason: String) {
        guard state != .closed else { return }
        lastError = reason
        setState(.disconnected)
        guard state == .disconnected, let reconnectTimer else { return }
        reconnectTimer.arm(after: nextReconnectDelay)
        nextReconnectDelay = min(nextReconnectDelay * 2, reconnectPolicy.maximumDelay)
    }

    private func reconnectTimerFired() {
        guard state == .disconnected else { return }
        connect()
    }

    private func setState(_ newState: RedisConnectionState) {
        guard state != newState else { return }
        state = newState
        onStateChange?(newState)
    }

    // MARK: Deadlines

    private func armDeadlineTimer() {
        guard !deadlineTimerArmed, let deadlineTimer, let oldest = commands.firstPending() else { return }
        deadlineTimer.arm(after: max(oldest.deadline - .now, .zero))
        deadlineTimerArmed = true
    }

    private func deadlineTimerFired() {
        deadlineTimerArmed = false
        let now = ContinuousClock.now
        // Completions may send, close or drop connections, so re-read the queue every time.
        while state != .closed, let oldest = commands.firstPending(), oldest.deadline <= now {
            oldest.complete(.failure(.timeout))
        }
        if state == .closed { return }
        if let context, let deadline = context.subscribeDeadline, deadline.deadline <= now {
            context.subscribeDeadline = nil
            abandon(context, reason: "SUBSCRIBE not confirmed within \(timeout)")
        }
        armDeadlineTimer()
    }

    // MARK: Subscriptions

    private func subscribe(_ channels: [String], on context: HiredisContext) {
        context.unconfirmedSubscriptions = channels.count
        guard context.subscribe(channels) else {
            abandon(context, reason: "SUBSCRIBE rejected by hiredis")
            return
        }
        let deadline = PendingCommand(deadline: .now + timeout) { _ in }
        context.subscribeDeadline = deadline
        track(deadline)
    }

    /// A confirmation or message on a subscribed connection.
    func subscriptionPushed(_ value: RedisValue, on context: HiredisContext) {
        guard context === self.context, let subscription, let parts = value.array, parts.count == 3,
              let kind = parts[0].string, let channel = parts[1].string else { return }
        switch kind {
        case "subscribe":
            context.unconfirmedSubscriptions -= 1
            if context.unconfirmedSubscriptions == 0 {
                context.subscribeDeadline?.complete(.success(.null))
                context.subscribeDeadline = nil
                connectionEstablished()
            }
        case "message":
            subscription.onMessage(RedisMessage(channel: channel, payload: parts[2].bytes ?? []))
        default:
            break
        }
    }

    private func assertOnLoopThread() {
        assert(pthread_equal(ownerThread, pthread_self()) != 0, "RedisClient used off its event loop thread")
    }
}

extension RedisError {
    fileprivate var reason: String {
        switch self {
        case .unavailable(let reason): reason
        case .timeout: "timed out"
        case .server(let message): message
        }
    }
}
