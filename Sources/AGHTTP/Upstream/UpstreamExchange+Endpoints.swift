internal import AGEventLoop

/// Where an exchange connects for a host-name target: the resolver's addresses, a warm pooled
/// connection to any of them first, then new connections tried in turn (recently failed
/// addresses last). When every address failed, the name is forgotten so the next request
/// resolves it again: the service may have moved.
extension UpstreamExchange {
    /// Asks the pool's resolver; the answer may come at once (cached) or later on the loop.
    func resolve() {
        state = .resolving
        // The resolver holds this closure (and so the exchange) until it answers; nothing else
        // does before a connection exists.
        pool.resolver.resolve(target.host) { result in self.resolved(result) }
    }

    private func resolved(_ result: Result<[IPAddress], DNSError>) {
        guard state == .resolving else { return }
        switch result {
        case .failure(let error):
            fail(.resolveFailed(error.description))
        case .success(let addresses):
            candidates = pool.endpoints(addresses, of: target)
            guard let first = candidates.first else {
                fail(.resolveFailed("cannot resolve '\(target.host)': no address"))
                return
            }
            for candidate in candidates {
                if let pooled = pool.takeIdle(candidate) {
                    endpoint = candidate
                    attach(pooled)
                    send()
                    return
                }
            }
            candidateIndex = 0
            endpoint = first
            connect()
        }
    }

    /// The connection to the current endpoint could not be made (refused, unreachable, no
    /// answer in time): the next address of a host name, else the failure. A TLS failure is
    /// final: another address would present the same certificate.
    func connectFailed(_ error: UpstreamError) {
        guard let endpoint, !candidates.isEmpty else {
            fail(error)
            return
        }
        if case .tlsFailed = error {
            fail(error)
            return
        }
        pool.connectFailed(endpoint)
        candidateIndex += 1
        if candidateIndex < candidates.count {
            detach(reuse: false)
            self.endpoint = candidates[candidateIndex]
            connect()
            return
        }
        pool.resolver.forget(target.host)
        guard candidates.count > 1 else {
            fail(error)
            return
        }
        switch error {
        case .timeout: fail(.timeout)
        default: fail(.connectFailed("\(error) (every one of \(candidates.count) addresses of \(target.host) failed)"))
        }
    }
}
