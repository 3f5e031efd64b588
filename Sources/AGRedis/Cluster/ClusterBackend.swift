public import AGEventLoop

/// A Redis Cluster behind one client: one pipelined connection per primary, commands routed
/// by their keys' hash slot, `MOVED` and `ASK` followed, the slot map kept fresh.
///
/// A command whose keys span slots is refused before sending (`CROSSSLOT`). Commands wait
/// (within their deadline) while the slot map is unknown or their slot's primary is not
/// connected: a failover is thus absorbed when it completes within the deadline, and fails as
/// `.unavailable` otherwise. The map is fetched with `CLUSTER SLOTS` at start, after every
/// `MOVED`, `CLUSTERDOWN` or `TRYAGAIN`, whenever a primary's connection drops (throttled to
/// one per `refreshInterval`), and every `periodicRefresh` as a safety net.
final class ClusterBackend: RedisBackend {
    static let maximumRedirects = 5
    static let refreshInterval = Duration.milliseconds(100)
    static let periodicRefresh = Duration.seconds(30)

    let seeds: [RedisURL.Endpoint]
    let settings: ConnectionSettings
    let loop: EventLoop
    let resolver: DNSResolver
    var onStateChange: ((RedisConnectionState) -> Void)?
    private(set) var state: RedisConnectionState = .connecting
    var lastError: String?

    var slots: SlotMap?
    var nodes: [RedisURL.Endpoint: RedisConnection] = [:]
    var parked: ParkedCommands!
    var refresh = RefreshState()

    init(seeds: [RedisURL.Endpoint], settings: ConnectionSettings, loop: EventLoop, resolver: DNSResolver) {
        self.seeds = seeds
        self.settings = settings
        self.loop = loop
        self.resolver = resolver
        parked = ParkedCommands(loop: loop) { [unowned self] in
            "cluster not reachable within the deadline" + (lastError.map { ": \($0)" } ?? "")
        }
        refresh.timer = EventTimer(loop: loop) { [unowned self] in refreshTimerFired() }
        requestRefresh()
    }

    func send(_ command: RedisCommand) {
        guard state != .closed else {
            command.completion(.failure(.unavailable("client closed")))
            return
        }
        switch ClusterRouting.route(command.arguments) {
        case .refused(let message): command.completion(.failure(.server(message)))
        case .slot(let slot): dispatch(command, slot: slot)
        case .anyNode: dispatch(command, slot: nil)
        }
    }

    func close() {
        guard state != .closed else { return }
        setState(.closed)
        refresh.timer = nil
        let seed = refresh.seedConnection
        refresh.seedConnection = nil
        seed?.close()
        let open = nodes.values
        nodes = [:]
        for connection in open { connection.close() }
        parked.close()
    }

    // MARK: Routing

    private func dispatch(_ command: RedisCommand, slot: UInt16?) {
        guard let slots else {
            parked.park(command)
            return
        }
        let target: RedisURL.Endpoint?
        if let slot {
            target = slots.owner(of: slot)
            if target == nil {
                lastError = "no primary serves slot \(slot)"
                requestRefresh()
            }
        } else {
            target = slots.servingPrimaries.first { nodes[$0]?.isConnected == true }
        }
        guard let target, case let connection = node(target), connection.isConnected else {
            parked.park(command)
            return
        }
        write(command, to: connection, at: target, asking: false)
    }

    /// Writes `command` (after `ASKING` for an ASK redirect) and handles cluster errors in its reply.
    private func write(_ command: RedisCommand, to connection: RedisConnection, at endpoint: RedisURL.Endpoint, asking: Bool) {
        if asking {
            connection.send(.strings(["ASKING"]), deadline: command.deadline) { _ in }
        }
        let queried = endpoint.host
        connection.send(command) { [weak self] result in
            guard let self, self.state != .closed else {
                command.completion(result)
                return
            }
            guard case .failure(let error) = result else {
                command.completion(result)
                return
            }
            self.handle(error, of: command, queried: queried)
        }
    }

    private func handle(_ error: RedisError, of command: RedisCommand, queried: String) {
        switch error {
        case .server(let message):
            if let redirect = ClusterRedirect(message, queried: queried) {
                follow(redirect, of: command, error: error)
            } else if message.hasPrefix("TRYAGAIN") || message.hasPrefix("CLUSTERDOWN") {
                // Not executed: a migration of the command's keys, or a cluster without quorum
                // for a moment. Wait for the next refresh, then try again.
                retry(command, error: error) { retried in
                    var waiting = retried
                    waiting.parkedBy = message
                    parked.park(waiting)
                }
                requestRefresh()
            } else {
                command.completion(.failure(error))
            }
        case .unavailable, .timeout:
            // The command may have run: never resent. The node may be gone: look again.
            requestRefresh()
            command.completion(.failure(error))
        }
    }

    private func follow(_ redirect: ClusterRedirect, of command: RedisCommand, error: RedisError) {
        switch redirect.kind {
        case .moved:
            slots?.assign(redirect.slot, to: redirect.target)
            requestRefresh()
            retry(command, error: error) { dispatch($0, slot: redirect.slot) }
        case .ask:
            // The slot is migrating: this one command goes to the importing node, the map stays.
            retry(command, error: error) { retried in
                let connection = node(redirect.target)
                if connection.isConnected {
                    write(retried, to: connection, at: redirect.target, asking: true)
                } else {
                    parked.park(retried)
                }
            }
        }
    }

    /// Runs `again` with the redirect counted, or completes with `error` once redirects ran out.
    private func retry(_ command: RedisCommand, error: RedisError, _ again: (RedisCommand) -> Void) {
        var retried = command
        retried.redirects += 1
        guard retried.redirects <= Self.maximumRedirects else {
            command.completion(.failure(error))
            return
        }
        again(retried)
    }

    /// The connection to a primary, opened on first use.
    func node(_ endpoint: RedisURL.Endpoint) -> RedisConnection {
        if let existing = nodes[endpoint] { return existing }
        let connection = RedisConnection(targets: [endpoint], settings: settings, role: .commands, loop: loop, resolver: resolver)
        nodes[endpoint] = connection
        connection.onStateChange = { [unowned self, unowned connection] newState in
            nodeChanged(connection, newState)
        }
        return connection
    }

    private func nodeChanged(_ connection: RedisConnection, _ newState: RedisConnectionState) {
        guard state != .closed else { return }
        switch newState {
        case .connected:
            closeSeedConnectionIfUnneeded()
            redispatchParked()
        case .disconnected:
            lastError = connection.lastError
            requestRefresh()
        case .connecting, .closed:
            break
        }
        updateState()
    }

    func redispatchParked() {
        for command in parked.takeAll() { send(command) }
    }

    /// Connected when every slot has a primary and every such primary's connection is up.
    func updateState() {
        guard state != .closed, let slots else { return }
        let serving = slots.servingPrimaries
        if slots.coversAllSlots, serving.allSatisfy({ nodes[$0]?.isConnected == true }) {
            setState(.connected)
        } else if state == .connected || serving.contains(where: { nodes[$0]?.state == .disconnected }) {
            setState(.disconnected)
        }
    }

    func setState(_ newState: RedisConnectionState) {
        guard state != newState else { return }
        state = newState
        onStateChange?(newState)
    }
}

extension RedisURL.Endpoint {
    /// The host of a TCP endpoint (the socket path otherwise).
    var host: String {
        switch self {
        case .tcp(let host, _): host
        case .unix(let path): path
        }
    }
}
