public import AGCrypto
internal import CEvent

/// TLS on a server's listener: where each accepted connection's context comes from, and how
/// long its handshake may take.
public struct HTTPServerTLS {
    /// Asked once per accepted connection, so a reload that swaps the context (certificate
    /// rotation) reaches new connections while open ones keep the context they started with.
    public var context: () -> TLSServerContext
    /// Deadline for the whole handshake, from accept; no byte the client sends extends it.
    public var handshakeTimeout: Duration

    public init(handshakeTimeout: Duration = .seconds(10), context: @escaping () -> TLSServerContext) {
        self.context = context
        self.handshakeTimeout = handshakeTimeout
    }
}

/// The TLS handshake of a server connection: its deadline, its completion, and why it failed.
extension HTTPServerConnection {
    /// Handshake events, while the machine is in `.handshaking`.
    func handshakeEvent(_ events: Int16) {
        if events & Int16(BEV_EVENT_CONNECTED) != 0 {
            cancelDeadline()
            machine.handshakeCompleted()
            setTimeouts(read: .idle)
            if let ssl = tlsConnection { server.delegate.tlsHandshakeCompleted?(TLSConnectionInfo.protocolVersion(ssl)) }
            return
        }
        var errors: [UInt] = []
        if let bev = bufferEvent {
            while case let code = bufferevent_get_openssl_error(bev), code != 0 { errors.append(code) }
        }
        // libevent hands the errors back newest first.
        errors.reverse()
        if events & Int16(BEV_EVENT_TIMEOUT) != 0 {
            handshakeFailed(TLSHandshakeFailure(reason: .timeout, detail: "no progress within the write timeout"))
        } else if errors.isEmpty, let ssl = tlsConnection, !TLSConnectionInfo.receivedAnything(ssl) {
            // Connected and closed without a byte (a TCP health check): no handshake was tried.
            close()
        } else {
            handshakeFailed(TLSHandshakeFailure(errors: errors, connection: nil))
        }
    }

    /// The handshake deadline passed.
    func handshakeTimedOut() {
        handshakeFailed(TLSHandshakeFailure(reason: .timeout, detail: "handshake not finished in time"))
    }

    private func handshakeFailed(_ failure: TLSHandshakeFailure) {
        server.delegate.tlsHandshakeFailed?(failure)
        close()
    }

    /// The connection's `SSL`, when it is a TLS connection.
    var tlsConnection: OpaquePointer? {
        guard isSecure, let bev = bufferEvent else { return nil }
        return bufferevent_openssl_get_ssl(bev)
    }
}
