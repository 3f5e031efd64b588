import AGConfig
import AGCrypto
import AGEventLoop
import AGHTTP

/// What a worker needs for TLS and names: the public listener's TLS settings, the handshake
/// metrics, and the configured resolver.
extension Worker {
    /// The public listener's TLS: contexts from the shared holder (a reload swaps it), the
    /// configured handshake deadline. Nil for a plain listener.
    static func listenerTLS(_ shared: GatewayShared, timeouts: ServerTimeouts) -> HTTPServerTLS? {
        guard let holder = shared.listenerTLS else { return nil }
        return HTTPServerTLS(handshakeTimeout: timeouts.tlsHandshake) { holder.context }
    }

    /// Registers the resolver `resolver:` configures on `loop`, before Redis or the upstream
    /// pool ask the loop for one (`EventLoop.resolver` returns the registered one).
    /// `resolver.timeout` bounds a whole lookup (what a silent name server costs a request), so
    /// each of the two tries evdns makes gets half of it.
    static func installResolver(_ config: ResolverConfig, on loop: EventLoop, logger: Logger) {
        let configuration = DNSResolver.Configuration(nameservers: config.nameservers, queryTimeout: config.timeout / 2,
                                                      attempts: 2)
        do {
            loop.register(try DNSResolver(loop: loop, configuration: configuration))
        } catch {
            // Only an unusable name server address throws, and the decoder refused those.
            logger.error("resolver configuration refused, using the system's", [("problem", .string(error.description))])
        }
    }
}

/// `attestgate_tls_handshake_failures_total{listener,reason}` series, rendered once.
enum TLSHandshakeSeries {
    static let failures: [TLSHandshakeFailure.Reason: String] = Dictionary(uniqueKeysWithValues: TLSHandshakeFailure.Reason.allCases.map {
        ($0, "attestgate_tls_handshake_failures_total{listener=\"public\",reason=\"\($0.rawValue)\"}")
    })

    static func completed(_ version: String) -> String {
        "attestgate_tls_handshakes_total{listener=\"public\",version=\"\(version)\"}"
    }
}
