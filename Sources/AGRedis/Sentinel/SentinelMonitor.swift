public import AGEventLoop

/// Finds the primary that a set of sentinels knows as `masterName`, and reports it again
/// whenever it moves.
///
/// Discovery asks the sentinels in turn (`SENTINEL get-master-addr-by-name`, no credentials),
/// one short-lived connection each; the first address wins. A subscriber connection to every
/// sentinel listens on `+promoted-slave` and `+switch-master` and reports a failover as soon as
/// either names the new primary; each time a subscription (re)connects, discovery runs again,
/// since a switch may have been announced while it was down. `+promoted-slave` comes from the
/// sentinel leading the failover (hence every sentinel is listened to) once it sees the replica
/// answer as a primary (its next poll, within ~1 s); `+switch-master` only when the failover ends, after the other replicas
/// have been reconfigured and resynced — seconds later, while the old primary, not yet demoted,
/// goes on accepting writes that are lost when it is (`SENTINEL FAILOVER` lost 6–7 s of them).
/// Owners also ask for a discovery when their primary's connection drops or answers
/// `READONLY`. At most one discovery runs at a time, repeated requests coalesce, and failures
/// back off with the reconnect policy.
final class SentinelMonitor {
    let sentinels: [RedisURL.Endpoint]
    let masterName: String
    /// Called with the primary's address after every successful discovery and every switch.
    var onMaster: ((RedisURL.Endpoint) -> Void)?
    /// Called when no sentinel could name the primary.
    var onFailure: ((String) -> Void)?

    private let settings: ConnectionSettings
    private let loop: EventLoop
    private let resolver: DNSResolver
    private var subscriptions: [RedisConnection] = []
    private var query: RedisConnection?
    private var remaining: ArraySlice<RedisURL.Endpoint> = []
    private var failures: [String] = []
    private var running = false
    private var again = false
    private var consecutiveFailures = 0
    private var retryTimer: EventTimer?
    private var closed = false

    init(sentinels: [RedisURL.Endpoint], masterName: String, settings: ConnectionSettings, loop: EventLoop, resolver: DNSResolver) {
        self.sentinels = sentinels
        self.masterName = masterName
        var sentinelSettings = settings
        sentinelSettings.authenticate = false
        sentinelSettings.database = 0
        sentinelSettings.requireMaster = false
        self.settings = sentinelSettings
        self.loop = loop
        self.resolver = resolver
        retryTimer = EventTimer(loop: loop) { [unowned self] in discover() }
    }

    /// Starts watching; call once the callbacks are set.
    func start() {
        subscriptions = sentinels.map { sentinel in
            let subscription = RedisConnection(
                targets: [sentinel], settings: settings,
                role: .subscriber(channels: ["+promoted-slave", "+switch-master"], onMessage: { [unowned self] in announced($0) }),
                loop: loop, resolver: resolver)
            subscription.onStateChange = { [unowned self] state in
                if state == .connected { discover() }
            }
            return subscription
        }
        discover()
    }

    func close() {
        closed = true
        retryTimer = nil
        for subscription in subscriptions { subscription.close() }
        query?.close()
        subscriptions = []
        query = nil
    }

    /// Asks the sentinels for the primary (now, or after the running discovery).
    func discover() {
        guard !closed else { return }
        if running {
            again = true
            return
        }
        running = true
        remaining = sentinels[...]
        failures = []
        askNext()
    }

    private func askNext() {
        query?.onStateChange = nil
        query?.close()
        query = nil
        guard let sentinel = remaining.popFirst() else {
            finish(nil)
            return
        }
        var oneShot = settings
        oneShot.reconnectPolicy = nil
        let connection = RedisConnection(targets: [sentinel], settings: oneShot, role: .commands, loop: loop, resolver: resolver)
        query = connection
        connection.onStateChange = { [unowned self, unowned connection] state in
            guard query === connection else { return }
            switch state {
            case .connected: ask(connection, sentinel)
            case .disconnected:
                failures.append(connection.lastError ?? "\(sentinel): unreachable")
                askNext()
            case .connecting, .closed: break
            }
        }
        if connection.state == .disconnected {
            failures.append(connection.lastError ?? "\(sentinel): unreachable")
            askNext()
        }
    }

    private func ask(_ connection: RedisConnection, _ sentinel: RedisURL.Endpoint) {
        let command = ["SENTINEL", "get-master-addr-by-name", masterName]
        connection.send(.strings(command), deadline: .now + settings.timeout) { [weak self] result in
            guard let self, self.query === connection else { return }
            if case .success(let value) = result, let parts = value.array, parts.count == 2,
               let host = parts[0].string, let port = parts[1].int.map(Int.init), (1...65535).contains(port) {
                self.finish(.tcp(host: host, port: port))
                return
            }
            switch result {
            case .success(.null): self.failures.append("\(sentinel): does not know master '\(self.masterName)'")
            case .success: self.failures.append("\(sentinel): unexpected answer")
            case .failure(let error): self.failures.append("\(sentinel): \(error.reason)")
            }
            self.askNext()
        }
    }

    private func finish(_ master: RedisURL.Endpoint?) {
        query?.onStateChange = nil
        query?.close()
        query = nil
        running = false
        if let master {
            consecutiveFailures = 0
            onMaster?(master)
        } else {
            consecutiveFailures += 1
            onFailure?("no sentinel named master '\(masterName)': " + failures.joined(separator: "; "))
            again = true
        }
        guard again, !closed else { return }
        again = false
        retryTimer?.arm(after: backoff)
    }

    /// 100 ms between discoveries, growing with the reconnect policy while they fail.
    private var backoff: Duration {
        var delay = Duration.milliseconds(100)
        guard consecutiveFailures > 0, let policy = settings.reconnectPolicy else { return delay }
        delay = max(delay, policy.initialDelay)
        for _ in 1..<min(consecutiveFailures, 16) { delay = min(delay * 2, policy.maximumDelay) }
        return delay
    }

    /// `+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>`, or
    /// `+promoted-slave slave <ip>:<port> <ip> <port> @ <name> <old-ip> <old-port>`.
    private func announced(_ message: RedisMessage) {
        let parts = message.string.split(separator: " ")
        let host: Substring, portText: Substring
        switch message.channel {
        case "+switch-master":
            guard parts.count == 5, parts[0] == masterName else { return }
            (host, portText) = (parts[3], parts[4])
        case "+promoted-slave":
            guard parts.count == 8, parts[0] == "slave", parts[4] == "@", parts[5] == masterName else { return }
            (host, portText) = (parts[2], parts[3])
        default:
            return
        }
        guard let port = Int(portText), (1...65535).contains(port) else { return }
        onMaster?(.tcp(host: String(host), port: port))
    }
}
