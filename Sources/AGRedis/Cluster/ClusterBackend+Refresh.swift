public import AGEventLoop

/// Slot-map refreshes: at most one in flight, at most one per `refreshInterval`, backing off
/// while the cluster does not answer.
struct RefreshState {
    var timer: EventTimer?
    var inFlight = false
    /// A refresh was requested while one was in flight: run another after it.
    var again = false
    var scheduledAt: ContinuousClock.Instant?
    var last: ContinuousClock.Instant?
    var failures = 0
    /// Used only while no primary's connection is up (at start, or when all were lost).
    var seedConnection: RedisConnection?
}

extension ClusterBackend {
    /// Asks for a fresh slot map soon (now, or once the throttle allows).
    func requestRefresh() {
        guard state != .closed else { return }
        if refresh.inFlight {
            refresh.again = true
            return
        }
        let earliest = (refresh.last ?? .now - Self.refreshInterval) + retryDelay
        if earliest <= .now {
            startRefresh()
        } else {
            schedule(at: earliest)
        }
    }

    /// The throttle, stretched by the reconnect backoff while refreshes keep failing.
    private var retryDelay: Duration {
        guard refresh.failures > 0, let policy = settings.reconnectPolicy else { return Self.refreshInterval }
        var delay = policy.initialDelay
        for _ in 1..<min(refresh.failures, 16) { delay = min(delay * 2, policy.maximumDelay) }
        return max(delay, Self.refreshInterval)
    }

    private func schedule(at instant: ContinuousClock.Instant) {
        if let scheduled = refresh.scheduledAt, scheduled <= instant { return }
        refresh.scheduledAt = instant
        refresh.timer?.arm(after: instant - .now)
    }

    func refreshTimerFired() {
        refresh.scheduledAt = nil
        requestRefresh()
    }

    private func startRefresh() {
        refresh.inFlight = true
        refresh.last = .now
        let serving = slots?.servingPrimaries ?? []
        var candidates = serving.filter { nodes[$0]?.isConnected == true }
        if candidates.isEmpty { candidates = nodes.filter { $0.value.isConnected }.map(\.key) }
        // After a failed refresh the next node is asked, not the same one again: a primary that
        // hangs (frozen, or cut off without a reset) keeps its connection up, and while it alone
        // was asked the map never learned that its replica had been promoted.
        let chosen = candidates.isEmpty ? nil : candidates[refresh.failures % candidates.count]
        if let chosen, let connection = nodes[chosen] {
            ask(connection, queried: chosen.host)
        } else {
            askSeed()
        }
    }

    private func ask(_ connection: RedisConnection, queried: String) {
        connection.send(.strings(["CLUSTER", "SLOTS"]), deadline: .now + settings.timeout) { [weak self] result in
            self?.refreshAnswered(result, queried: queried)
        }
    }

    /// One pass over the seeds (each name resolved, each address tried) on a short-lived connection.
    private func askSeed() {
        if let seed = refresh.seedConnection {
            switch seed.state {
            case .connected: ask(seed, queried: seed.peerAddress ?? seeds[0].host)
            case .disconnected: seed.reconnect()
            case .connecting, .closed: break
            }
            return
        }
        var seedSettings = settings
        seedSettings.reconnectPolicy = nil
        let seed = RedisConnection(targets: seeds, settings: seedSettings, role: .commands, loop: loop, resolver: resolver)
        refresh.seedConnection = seed
        seed.onStateChange = { [unowned self, unowned seed] newState in
            guard refresh.seedConnection === seed, refresh.inFlight else { return }
            switch newState {
            case .connected: ask(seed, queried: seed.peerAddress ?? seeds[0].host)
            case .disconnected: refreshAnswered(.failure(.unavailable(seed.lastError ?? "no seed answered")), queried: "")
            case .connecting, .closed: break
            }
        }
        if seed.state == .disconnected {
            refreshAnswered(.failure(.unavailable(seed.lastError ?? "no seed answered")), queried: "")
        }
    }

    private func refreshAnswered(_ result: Result<RedisValue, RedisError>, queried: String) {
        guard state != .closed, refresh.inFlight else { return }
        refresh.inFlight = false
        let parsed: Result<SlotMap, RedisError> = result.flatMap { value in
            do throws(RedisError) {
                return .success(try SlotMap(clusterSlots: value, queried: queried))
            } catch {
                return .failure(error)
            }
        }
        switch parsed {
        case .success(let map):
            refresh.failures = 0
            apply(map)
            schedule(at: .now + Self.periodicRefresh)
            if refresh.again || !map.coversAllSlots {
                refresh.again = false
                requestRefresh()
            }
        case .failure(let error):
            refresh.failures += 1
            lastError = "CLUSTER SLOTS failed: \(error.reason)"
            refresh.again = false
            if slots == nil { setState(.disconnected) }
            requestRefresh()
        }
    }

    private func apply(_ map: SlotMap) {
        slots = map
        for primary in map.servingPrimaries { _ = node(primary) }
        // Former primaries (failed over, removed) are closed once nothing awaits their replies:
        // a reply still due may be the MOVED that sends its command on.
        for (endpoint, connection) in nodes where !map.primaries.contains(endpoint) && !connection.hasPendingCommands {
            connection.onStateChange = nil
            connection.close()
            nodes[endpoint] = nil
        }
        closeSeedConnectionIfUnneeded()
        redispatchParked()
        updateState()
    }

    /// The seed connection is only for refreshes while no primary is reachable.
    func closeSeedConnectionIfUnneeded() {
        guard let seed = refresh.seedConnection, !refresh.inFlight,
              nodes.values.contains(where: \.isConnected) else { return }
        refresh.seedConnection = nil
        seed.onStateChange = nil
        seed.close()
    }
}
