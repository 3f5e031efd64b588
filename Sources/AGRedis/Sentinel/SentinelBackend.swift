public import AGEventLoop

/// A connection that follows a Sentinel-managed primary: commands (with parking) or a
/// subscription, re-pointed whenever the monitor reports another address.
///
/// The connection checks `ROLE` in its handshake, so a demoted primary that comes back is not
/// mistaken for the master. When the connection drops, or a write is refused with `READONLY`
/// (the node was demoted under us), the sentinels are asked again; a `READONLY` command did
/// not run and is parked until the new primary answers, within its deadline.
final class SentinelBackend: RedisBackend {
    var onStateChange: ((RedisConnectionState) -> Void)?
    private(set) var state: RedisConnectionState = .connecting
    private(set) var lastError: String?
    /// The primary's address as the sentinels gave it, once known.
    private(set) var master: RedisURL.Endpoint?

    private let monitor: SentinelMonitor
    private let settings: ConnectionSettings
    private let role: RedisConnection.Role
    private let loop: EventLoop
    private let resolver: DNSResolver
    private var connection: RedisConnection?
    private var parked: ParkedCommands!

    init(sentinels: [RedisURL.Endpoint], masterName: String, settings: ConnectionSettings,
         role: RedisConnection.Role = .commands, loop: EventLoop, resolver: DNSResolver) {
        var primarySettings = settings
        primarySettings.requireMaster = true
        // Reconnecting is this backend's decision: the address may have changed meanwhile.
        primarySettings.reconnectPolicy = nil
        self.settings = primarySettings
        self.role = role
        self.loop = loop
        self.resolver = resolver
        monitor = SentinelMonitor(sentinels: sentinels, masterName: masterName, settings: settings, loop: loop, resolver: resolver)
        parked = ParkedCommands(loop: loop) { [unowned self] in
            "no primary reachable within the deadline" + (lastError.map { ": \($0)" } ?? "")
        }
        monitor.onMaster = { [unowned self] in masterReported($0) }
        monitor.onFailure = { [unowned self] reason in
            lastError = reason
            if connection?.isConnected != true { setState(.disconnected) }
        }
        monitor.start()
    }

    func send(_ command: RedisCommand) {
        guard state != .closed else {
            command.completion(.failure(.unavailable("client closed")))
            return
        }
        guard let connection, connection.isConnected else {
            parked.park(command)
            return
        }
        connection.send(command) { [weak self] result in
            guard let self, case .failure(.server(let message)) = result, message.hasPrefix("READONLY") else {
                command.completion(result)
                return
            }
            // Written to a node that is no longer the primary: refused, so safe to resend.
            self.lastError = "\(connection.peer ?? "primary") answered READONLY"
            self.monitor.discover()
            var retried = command
            retried.redirects += 1
            if retried.redirects > ClusterBackend.maximumRedirects {
                command.completion(result)
            } else {
                self.parked.park(retried)
            }
        }
    }

    func close() {
        guard state != .closed else { return }
        setState(.closed)
        monitor.close()
        connection?.onStateChange = nil
        connection?.close()
        connection = nil
        parked.close()
    }

    private func masterReported(_ endpoint: RedisURL.Endpoint) {
        guard state != .closed else { return }
        if endpoint == master, let connection, connection.state != .disconnected {
            return
        }
        if endpoint == master, let connection {
            connection.reconnect()
            return
        }
        master = endpoint
        let old = connection
        old?.onStateChange = nil
        let replacement = RedisConnection(targets: [endpoint], settings: settings, role: role, loop: loop, resolver: resolver)
        connection = replacement
        replacement.onStateChange = { [unowned self, unowned replacement] state in
            guard connection === replacement else { return }
            connectionChanged(state)
        }
        // Replies still due on the old primary arrive or fail on their own; then it goes.
        old?.close()
        connectionChanged(replacement.state)
    }

    private func connectionChanged(_ newState: RedisConnectionState) {
        switch newState {
        case .connected:
            lastError = nil
            setState(.connected)
            for command in parked.takeAll() { send(command) }
        case .disconnected:
            lastError = connection?.lastError
            if state == .connected { setState(.disconnected) }
            monitor.discover()
        case .connecting, .closed:
            break
        }
    }

    private func setState(_ newState: RedisConnectionState) {
        guard state != newState else { return }
        state = newState
        onStateChange?(newState)
    }
}
