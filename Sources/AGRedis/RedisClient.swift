public import AGEventLoop

/// The connection's life cycle, reported to `RedisClient.onStateChange`.
public enum RedisConnectionState: Sendable, Hashable {
    /// Connecting or authenticating (a cluster: fetching its slot map); commands wait.
    case connecting
    /// Handshake done (a subscriber: every channel confirmed; a cluster: every slot's primary
    /// connected).
    case connected
    /// Waiting to reconnect (a cluster: some slot's primary unreachable).
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

/// An async Redis client on one event loop, whatever the deployment behind the URL: one
/// server, a Redis Cluster (commands routed to the slot owner, MOVED/ASK followed) or a
/// Sentinel-managed primary (failovers followed). Callers see one API.
///
/// Confined to the thread that runs the loop: create, use and close it there. Commands are
/// pipelined; each gets `timeout` as a deadline fixed when it is sent, which redirects and
/// retries do not extend. While connecting, commands wait (within their deadline); while a
/// single server is known to be down they fail at once with `.unavailable`. Completions run on
/// the loop thread, possibly before `send` returns. Host names are resolved asynchronously
/// with the loop's `DNSResolver`.
public final class RedisClient {
    public let url: RedisURL
    public let timeout: Duration
    public let reconnectPolicy: RedisReconnectPolicy
    /// Called on every state change, on the loop thread; the gateway feeds `/readyz` and metrics from it.
    public var onStateChange: ((RedisConnectionState) -> Void)?

    private let backend: any RedisBackend

    /// Starts connecting at once; call on `loop`'s thread.
    /// - Parameters:
    ///   - loop: the event loop the client lives on; it must outlive the client.
    ///   - timeout: deadline for every command, and for each connect attempt plus handshake.
    ///   - resolver: resolves host names; the loop's shared resolver by default.
    public init(url: RedisURL, loop: EventLoop, timeout: Duration = .seconds(1),
                reconnectPolicy: RedisReconnectPolicy = .default, resolver: DNSResolver? = nil) {
        self.url = url
        self.timeout = timeout
        self.reconnectPolicy = reconnectPolicy
        let settings = ConnectionSettings(url: url, timeout: timeout, reconnectPolicy: reconnectPolicy)
        let resolver = resolver ?? loop.resolver
        switch url.topology {
        case .standalone(let endpoint):
            backend = StandaloneBackend(endpoint: endpoint, settings: settings, loop: loop, resolver: resolver)
        case .cluster(let seeds):
            backend = ClusterBackend(seeds: seeds, settings: settings, loop: loop, resolver: resolver)
        case .sentinel(let sentinels, let masterName):
            backend = SentinelBackend(sentinels: sentinels, masterName: masterName, settings: settings,
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

    public var state: RedisConnectionState { backend.state }
    public var isConnected: Bool { state == .connected }
    /// The reason the last connection attempt or connection ended, for logs; never a password.
    public var lastError: String? { backend.lastError }
    /// A Redis Cluster's slot map as the client last learned it (`CLUSTER SLOTS`, `MOVED`): which
    /// primary serves each slot. `nil` for one server or a Sentinel-managed primary, and until
    /// the first map arrives.
    public var slotMap: SlotMap? { (backend as? ClusterBackend)?.slots }

    /// Sends one command, e.g. `["SET", key, value]`. The completion runs exactly once.
    public func send(_ arguments: [String], completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        backend.send(RedisCommand(arguments: .strings(arguments), deadline: .now + timeout, completion: completion))
    }

    /// Sends one command whose arguments are raw bytes. The completion runs exactly once.
    public func send(_ arguments: [[UInt8]], completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        backend.send(RedisCommand(arguments: .bytes(arguments), deadline: .now + timeout, completion: completion))
    }

    /// Sends one command with its own deadline instead of `timeout` — for blocking reads such
    /// as `XREAD BLOCK`, on a client used for nothing else (a blocked connection delays every
    /// command pipelined behind it).
    public func send(_ arguments: [String], timeout: Duration,
                     completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        backend.send(RedisCommand(arguments: .strings(arguments), deadline: .now + timeout, completion: completion))
    }

    /// Sends a write and `WAIT`s until `replicas` replicas acknowledged it (at most `within`,
    /// inside the command's deadline) before completing: Redis replicates asynchronously, so an
    /// acknowledged write can otherwise be lost when its primary fails over. When fewer replicas
    /// confirm in time, the completion gets `.unavailable` although the primary applied the write.
    /// Redirects and retries repeat the `WAIT` on the node that finally runs the command.
    public func send(_ arguments: [String], confirmedBy replicas: Int, within: Duration,
                     completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        let confirmation = replicas > 0 ? (replicas, within) : nil
        backend.send(RedisCommand(arguments: .strings(arguments), deadline: .now + timeout, confirmation: confirmation,
                                  completion: completion))
    }

    /// Disconnects for good: pending commands complete with `.unavailable`, no reconnect follows.
    /// Must run before the `event_base` is freed.
    public func close() {
        backend.close()
    }
}

/// What the client delegates to: one server, a cluster, or a Sentinel-managed primary.
protocol RedisBackend: AnyObject {
    var state: RedisConnectionState { get }
    var lastError: String? { get }
    var onStateChange: ((RedisConnectionState) -> Void)? { get set }
    func send(_ command: RedisCommand)
    func close()
}

/// One server, one connection.
final class StandaloneBackend: RedisBackend {
    private let connection: RedisConnection
    private var parked: ParkedCommands!
    var onStateChange: ((RedisConnectionState) -> Void)?

    init(endpoint: RedisURL.Endpoint, settings: ConnectionSettings, loop: EventLoop, resolver: DNSResolver) {
        connection = RedisConnection(targets: [endpoint], settings: settings, role: .commands, loop: loop, resolver: resolver)
        parked = ParkedCommands(loop: loop) { [unowned self] in
            "not connected within the deadline" + (connection.lastError.map { ": \($0)" } ?? "")
        }
        connection.onStateChange = { [unowned self] state in connectionChanged(state) }
    }

    var state: RedisConnectionState { connection.state }
    var lastError: String? { connection.lastError }

    func send(_ command: RedisCommand) {
        switch connection.state {
        case .connected: connection.send(command, completion: command.completion)
        case .connecting: parked.park(command)
        case .disconnected, .closed: command.completion(.failure(.unavailable(connection.lastError ?? "not connected")))
        }
    }

    func close() {
        connection.close()
        parked.close()
    }

    private func connectionChanged(_ state: RedisConnectionState) {
        switch state {
        case .connected: for command in parked.takeAll() { send(command) }
        case .disconnected, .closed: parked.failAll(.unavailable(connection.lastError ?? "not connected"))
        case .connecting: break
        }
        onStateChange?(state)
    }
}
