/// Connect attempts: every target resolved, every address tried in turn, then the handshake.
extension RedisConnection {
    func connect() {
        setState(.connecting)
        guard state == .connecting else { return }
        attempt.generation += 1
        attempt.endpoints = targets[...]
        attempt.candidates = []
        attempt.lastReason = nil
        tryNextCandidate()
    }

    /// Connects to the next address, resolving the next target when the addresses ran out.
    private func tryNextCandidate() {
        guard state == .connecting else { return }
        if let candidate = attempt.candidates.popFirst() {
            open(candidate)
            return
        }
        guard let endpoint = attempt.endpoints.popFirst() else {
            connectionEnded(reason: attempt.lastReason ?? "no address to connect to")
            return
        }
        switch endpoint {
        case .unix(let path):
            attempt.candidates = [(path, 0, true)]
            tryNextCandidate()
        case .tcp(let host, let port):
            let generation = attempt.generation
            resolver.resolve(host) { [weak self] result in
                guard let self, self.attempt.generation == generation, self.state == .connecting else { return }
                switch result {
                case .success(let addresses):
                    self.attempt.candidates = addresses.map { ($0.description, port, false) }[...]
                case .failure(let error):
                    self.attempt.lastReason = error.description
                }
                self.tryNextCandidate()
            }
        }
    }

    private func open(_ candidate: (address: String, port: Int, isUnix: Bool)) {
        let name = candidate.isUnix ? candidate.address
            : (candidate.address.contains(":") ? "[\(candidate.address)]:\(candidate.port)" : "\(candidate.address):\(candidate.port)")
        switch HiredisContext.connect(address: candidate.address, port: candidate.port, isUnix: candidate.isUnix,
                                      loop: loop, owner: self) {
        case .failure(let error):
            attemptFailed("\(name): \(error.reason)")
        case .success(let newContext):
            context = newContext
            peer = name
            peerAddress = candidate.address
            sendHandshake(on: newContext)
        }
    }

    /// This address did not work out before the handshake finished: try the next one.
    func attemptFailed(_ reason: String) {
        attempt.lastReason = reason
        tryNextCandidate()
    }

    /// `AUTH`, `SELECT` and (for sentinel-managed primaries) `ROLE`; `PING` when none is
    /// needed. Each has the client's timeout, which therefore also bounds a hung TCP connect.
    private func sendHandshake(on context: HiredisContext) {
        var steps: [[String]] = []
        if settings.authenticate, let password = settings.password {
            steps.append(settings.username.map { ["AUTH", $0, password] } ?? ["AUTH", password])
        }
        if settings.database != 0 { steps.append(["SELECT", String(settings.database)]) }
        if settings.requireMaster { steps.append(["ROLE"]) }
        if steps.isEmpty { steps.append(["PING"]) }
        context.handshakeRepliesLeft = steps.count
        let deadline = ContinuousClock.now + settings.timeout
        for step in steps {
            write(.strings(step), deadline: deadline, on: context) { [weak self] result in
                self?.handshakeReplied(result, step: step[0], on: context)
            }
        }
    }

    private func handshakeReplied(_ result: Result<RedisValue, RedisError>, step: String, on context: HiredisContext) {
        guard context === self.context, state == .connecting else { return }
        switch result {
        case .failure(let error):
            drop(context, reason: "\(peer ?? "server"): \(step) failed during connect: \(error.reason)")
        case .success(let value):
            if step == "ROLE", value.array?.first?.string != "master" {
                drop(context, reason: "\(peer ?? "server") is not a master (ROLE: \(value.array?.first?.string ?? "?"))")
                return
            }
            context.handshakeRepliesLeft -= 1
            guard context.handshakeRepliesLeft == 0 else { return }
            if case .subscriber(let channels, _) = role {
                subscribe(channels, on: context)
            } else {
                connectionEstablished()
            }
        }
    }
}
