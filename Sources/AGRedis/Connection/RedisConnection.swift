public import AGEventLoop
internal import Glibc

/// Credentials and limits shared by the connections of one client.
struct ConnectionSettings {
    var username: String?
    var password: String?
    var database: Int
    var timeout: Duration
    /// `nil`: one attempt, then stay disconnected until the owner calls `reconnect()`.
    var reconnectPolicy: RedisReconnectPolicy?
    /// Sentinel-managed primaries: `ROLE` must answer `master`, or the handshake fails.
    var requireMaster = false
    /// False for sentinels, which are asked without the data nodes' credentials.
    var authenticate = true

    init(url: RedisURL, timeout: Duration, reconnectPolicy: RedisReconnectPolicy?) {
        username = url.username
        password = url.password
        database = url.database
        self.timeout = timeout
        self.reconnectPolicy = reconnectPolicy
    }
}

/// One connection to one Redis server (the first of `targets` that answers), kept alive.
///
/// A connect attempt resolves each target's host name asynchronously and tries every address
/// in turn (`timeout` each), then runs the handshake: `AUTH`, `SELECT`, `ROLE` when required,
/// otherwise `PING`, so "connected" means the server answered. Commands may be sent only while
/// `.connected` (owners park them otherwise); they are pipelined, each with its own deadline.
/// When the connection is lost, the names are resolved again and, with a reconnect policy, the
/// next attempt follows after an exponential backoff. Loop thread only.
final class RedisConnection {
    enum Role {
        case commands
        /// A Pub/Sub connection; see RedisConnection+Subscriber.swift.
        case subscriber(channels: [String], onMessage: (RedisMessage) -> Void)
    }

    let targets: [RedisURL.Endpoint]
    let settings: ConnectionSettings
    let role: Role
    private(set) var state: RedisConnectionState = .connecting
    /// Called on every state change, on the loop thread.
    var onStateChange: ((RedisConnectionState) -> Void)?
    /// Why the last attempt or connection ended; never contains a password.
    private(set) var lastError: String?
    /// `host:port` or socket path of the live connection, for logs and tests.
    var peer: String?
    /// The IP address (or socket path) of the live connection.
    var peerAddress: String?

    let loop: EventLoop
    let resolver: DNSResolver
    private let ownerThread = pthread_self()
    var context: HiredisContext?
    private var commands = CommandQueue()
    private var deadlineTimer: EventTimer?
    private var armedDeadline: ContinuousClock.Instant?
    private var reconnectTimer: EventTimer?
    var healthCheckTimer: EventTimer?
    private var nextReconnectDelay: Duration
    var attempt = Attempt()

    /// What is left to try in the current connect attempt.
    struct Attempt {
        /// Bumped for every attempt, so a late resolver answer for an old one is ignored.
        var generation = 0
        var endpoints: ArraySlice<RedisURL.Endpoint> = []
        var candidates: ArraySlice<(address: String, port: Int, isUnix: Bool)> = []
        var lastReason: String?
    }

    /// Starts connecting at once; call on `loop`'s thread.
    init(targets: [RedisURL.Endpoint], settings: ConnectionSettings, role: Role, loop: EventLoop, resolver: DNSResolver) {
        precondition(!targets.isEmpty, "a connection needs a server")
        self.targets = targets
        self.settings = settings
        self.role = role
        self.loop = loop
        self.resolver = resolver
        nextReconnectDelay = settings.reconnectPolicy?.initialDelay ?? .zero
        deadlineTimer = EventTimer(loop: loop) { [unowned self] in deadlineTimerFired() }
        reconnectTimer = EventTimer(loop: loop) { [unowned self] in reconnectTimerFired() }
        if case .subscriber = role {
            healthCheckTimer = EventTimer(loop: loop) { [unowned self] in healthCheckTimerFired() }
        }
        connect()
    }

    deinit {
        onStateChange = nil
        close()
    }

    var isConnected: Bool { state == .connected }
    /// True while some command written to the connection awaits its reply.
    var hasPendingCommands: Bool { !commands.isEmpty }

    /// Writes one command; only while `.connected` (and for the commands role, or the
    /// subscriber's own handshake). The completion runs exactly once.
    func send(_ arguments: RedisArguments, deadline: ContinuousClock.Instant,
              completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        assertOnLoopThread()
        guard state == .connected, let context else {
            completion(.failure(.unavailable(lastError ?? "not connected")))
            return
        }
        write(arguments, deadline: deadline, on: context, completion: completion)
    }

    /// Writes a caller's command; with a confirmation, `WAIT` follows on this connection and the
    /// command's reply is passed on only once enough replicas acknowledged everything this
    /// connection wrote (else `.unavailable`: the write happened on the primary but may be lost
    /// in a failover). Error replies pass through unchanged (a MOVED is redirected as usual).
    func send(_ command: RedisCommand, completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        guard let confirmation = command.confirmation else {
            send(command.arguments, deadline: command.deadline, completion: completion)
            return
        }
        var reply: Result<RedisValue, RedisError>?
        send(command.arguments, deadline: command.deadline) { reply = $0 }
        let milliseconds = max(1, Int(confirmation.within / .milliseconds(1)))
        send(.strings(["WAIT", String(confirmation.replicas), String(milliseconds)]), deadline: command.deadline) { waited in
            guard let result = reply else { return completion(.failure(.unavailable("reply missing before WAIT"))) }
            guard case .success = result else { return completion(result) }
            switch waited {
            case .success(let count) where (count.int ?? 0) >= Int64(confirmation.replicas):
                completion(result)
            case .success(let count):
                completion(.failure(.unavailable(
                    "write acknowledged by \(count.int ?? 0) of \(confirmation.replicas) replicas within \(milliseconds) ms")))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Disconnects for good: commands in flight complete with `.unavailable`, no reconnect.
    func close() {
        guard state != .closed else { return }
        assertOnLoopThread()
        deadlineTimer = nil
        reconnectTimer = nil
        healthCheckTimer = nil
        attempt.generation += 1
        lastError = "client closed"
        let closing = context
        context = nil
        setState(.closed)
        closing?.free()
        commands.removeAll()
    }

    /// Starts a new attempt now if disconnected (for owners without a reconnect policy).
    func reconnect() {
        guard state == .disconnected else { return }
        reconnectTimer?.cancel()
        connect()
    }

    func write(_ arguments: RedisArguments, deadline: ContinuousClock.Instant, on context: HiredisContext,
               completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        let command = PendingCommand(deadline: deadline, completion: completion)
        guard context.send(arguments, command: command) else {
            completion(.failure(.unavailable(context.isFreeing ? context.errorMessage : "command rejected by hiredis")))
            return
        }
        track(command)
    }

    func track(_ command: PendingCommand) {
        commands.append(command)
        if armedDeadline.map({ command.deadline < $0 }) ?? true {
            armDeadlineTimer(for: command.deadline)
        }
    }

    // MARK: Connection life cycle (attempts and handshake: RedisConnection+Connect.swift)

    func connectionEstablished() {
        nextReconnectDelay = settings.reconnectPolicy?.initialDelay ?? .zero
        lastError = nil
        armHealthCheck()
        setState(.connected)
    }

    /// Frees a context hiredis still considers healthy (failed handshake, missed deadline).
    func drop(_ context: HiredisContext, reason: String) {
        guard context === self.context else { return }
        self.context = nil
        context.free()
        lost(reason: reason)
    }

    /// hiredis reports that `context` failed to connect or disconnected.
    func contextLost(_ context: HiredisContext, reason: String) {
        guard context === self.context else { return }
        self.context = nil
        lost(reason: "\(peer ?? "server"): \(reason)")
    }

    private func lost(reason: String) {
        peer = nil
        peerAddress = nil
        if state == .connecting {
            attemptFailed(reason)
        } else {
            connectionEnded(reason: reason)
        }
    }

    func connectionEnded(reason: String) {
        guard state != .closed else { return }
        lastError = reason
        // The host may have moved (a restarted pod, a failover behind a name): ask DNS again.
        for case .tcp(let host, _) in targets { resolver.forget(host) }
        setState(.disconnected)
        guard state == .disconnected, let policy = settings.reconnectPolicy, let reconnectTimer else { return }
        reconnectTimer.arm(after: nextReconnectDelay)
        nextReconnectDelay = min(nextReconnectDelay * 2, policy.maximumDelay)
    }

    private func reconnectTimerFired() {
        guard state == .disconnected else { return }
        connect()
    }

    func setState(_ newState: RedisConnectionState) {
        guard state != newState else { return }
        state = newState
        onStateChange?(newState)
    }

    // MARK: Deadlines

    private func armDeadlineTimer(for deadline: ContinuousClock.Instant) {
        guard let deadlineTimer else { return }
        armedDeadline = deadline
        deadlineTimer.arm(after: max(deadline - .now, .zero))
    }

    private func deadlineTimerFired() {
        armedDeadline = nil
        let (expired, next) = commands.expired(now: .now)
        if let next { armDeadlineTimer(for: next) }
        // Completions may send (re-arming earlier), close or drop the connection.
        for command in expired { command.complete(.failure(.timeout)) }
    }

    func assertOnLoopThread() {
        assert(pthread_equal(ownerThread, pthread_self()) != 0, "Redis client used off its event loop thread")
    }
}

extension RedisError {
    /// The bare reason, for composing `lastError` texts.
    var reason: String {
        switch self {
        case .unavailable(let reason): reason
        case .timeout: "timed out"
        case .server(let message): message
        }
    }
}
