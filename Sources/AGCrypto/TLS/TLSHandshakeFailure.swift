internal import COpenSSL
internal import CShims

/// Why a TLS handshake failed, sorted into a few stable reasons (the label of the handshake
/// failure metric) plus OpenSSL's own text for logs.
public struct TLSHandshakeFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable, low-cardinality reasons.
    public enum Reason: String, Sendable, CaseIterable {
        /// The peer offered only protocol versions outside TLS 1.2–1.3.
        case protocolVersion = "protocol_version"
        /// No cipher suite (or group) in common.
        case noSharedCipher = "no_shared_cipher"
        /// ALPN offered without `http/1.1`.
        case applicationProtocol = "alpn"
        /// The bytes were not TLS at all (plain HTTP sent to a TLS port, for example).
        case notTLS = "not_tls"
        /// A certificate was refused: ours by the client (it sent an alert), or the upstream's by us.
        case certificate
        /// The handshake did not finish within its deadline.
        case timeout
        /// The peer closed or reset the connection during the handshake.
        case closed
        case other
    }

    public let reason: Reason
    /// OpenSSL's text ("unsupported protocol", "certificate verify failed: Hostname mismatch").
    public let detail: String

    public init(reason: Reason, detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.rawValue): \(detail)" }

    /// Classifies the OpenSSL errors a failed handshake left (oldest first); `connection` adds
    /// the certificate verification result on the client side. No error at all means the
    /// socket was closed or reset under the handshake.
    package init(errors: [UInt], connection: OpaquePointer?) {
        if let connection {
            let result = SSL_get_verify_result(connection)
            if result != X509_V_OK {
                let text = X509_verify_cert_error_string(result).map { String(cString: $0) } ?? "code \(result)"
                self.init(reason: .certificate, detail: "certificate verify failed: \(text)")
                return
            }
        }
        guard let code = errors.first(where: { ag_err_get_lib($0) == ERR_LIB_SSL }) ?? errors.first else {
            self.init(reason: .closed, detail: "connection closed during the handshake")
            return
        }
        self.init(reason: Self.classify(code), detail: TLSErrorText.describe(code))
    }

    private static func classify(_ code: UInt) -> Reason {
        guard ag_err_get_lib(code) == ERR_LIB_SSL else { return .closed }
        let reason = ag_err_get_reason(code)
        switch reason {
        case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_VERSION_TOO_LOW, SSL_R_NO_PROTOCOLS_AVAILABLE,
             SSL_AD_REASON_OFFSET + SSL_AD_PROTOCOL_VERSION:
            return .protocolVersion
        case SSL_R_NO_SHARED_CIPHER, SSL_R_NO_SHARED_GROUPS, SSL_AD_REASON_OFFSET + SSL_AD_INSUFFICIENT_SECURITY:
            return .noSharedCipher
        case SSL_R_NO_APPLICATION_PROTOCOL, SSL_AD_REASON_OFFSET + SSL_AD_NO_APPLICATION_PROTOCOL:
            return .applicationProtocol
        case SSL_R_HTTP_REQUEST, SSL_R_HTTPS_PROXY_REQUEST, SSL_R_WRONG_VERSION_NUMBER, SSL_R_PACKET_LENGTH_TOO_LONG,
             SSL_R_RECORD_LENGTH_MISMATCH:
            return .notTLS
        case SSL_R_CERTIFICATE_VERIFY_FAILED,
             SSL_AD_REASON_OFFSET + SSL_AD_BAD_CERTIFICATE, SSL_AD_REASON_OFFSET + SSL_AD_UNSUPPORTED_CERTIFICATE,
             SSL_AD_REASON_OFFSET + SSL_AD_CERTIFICATE_REVOKED, SSL_AD_REASON_OFFSET + SSL_AD_CERTIFICATE_EXPIRED,
             SSL_AD_REASON_OFFSET + SSL_AD_CERTIFICATE_UNKNOWN, SSL_AD_REASON_OFFSET + SSL_AD_UNKNOWN_CA:
            return .certificate
        case SSL_R_UNEXPECTED_EOF_WHILE_READING:
            return .closed
        default:
            return .other
        }
    }
}

/// Facts about an established TLS connection, for logs and metrics.
package enum TLSConnectionInfo {
    /// `TLSv1.2` or `TLSv1.3`.
    package static func protocolVersion(_ connection: OpaquePointer) -> String {
        SSL_get_version(connection).map { String(cString: $0) } ?? "unknown"
    }

    /// Whether any byte arrived from the peer (a TCP health check that connects and closes
    /// sends none: it is not a failed handshake).
    package static func receivedAnything(_ connection: OpaquePointer) -> Bool {
        guard let input = SSL_get_rbio(connection) else { return false }
        return BIO_number_read(input) > 0
    }

    /// Whether any byte went to the peer (a ClientHello sent: the TCP connection was up).
    package static func sentAnything(_ connection: OpaquePointer) -> Bool {
        guard let output = SSL_get_wbio(connection) else { return false }
        return BIO_number_written(output) > 0
    }

    /// Sends close_notify once, without waiting for the peer's (the socket closes right after).
    /// Only for a connection whose handshake finished and that saw no fatal error.
    package static func sendCloseNotify(_ connection: OpaquePointer) {
        // Once: a connection that lingered after its answer sent it then.
        guard SSL_get_shutdown(connection) & SSL_SENT_SHUTDOWN == 0 else { return }
        SSL_set_quiet_shutdown(connection, 0)
        _ = SSL_shutdown(connection)
        ERR_clear_error()
    }
}
