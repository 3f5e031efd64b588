internal import COpenSSL
internal import CShims

/// Why a TLS context could not be built: which of its inputs was at fault, and OpenSSL's reason.
public struct TLSContextError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input a context is built from.
    public enum Input: Sendable, Equatable {
        /// The PEM certificate chain (leaf first).
        case certificateChain
        /// The PEM private key, or its match with the certificate.
        case privateKey
        /// The PEM file of trusted CA certificates, or the system store.
        case trustedCertificates
        /// OpenSSL itself (out of memory, a setting refused).
        case library
    }

    public let input: Input
    public let reason: String

    public init(input: Input, reason: String) {
        self.input = input
        self.reason = reason
    }

    public var description: String { reason }

    /// A well-formed key that is not the certificate's. OpenSSL's own reason adds nothing ("key
    /// values mismatch"), or misleads for a key of another type ("no certificate assigned"), so
    /// it is left out; the queue is cleared.
    static var keyMismatch: TLSContextError {
        ERR_clear_error()
        return TLSContextError(input: .privateKey, reason: "the private key does not match the certificate")
    }

    /// An encrypted key file: OpenSSL's reason ("interrupted or cancelled", the refusing pass
    /// phrase callback's) would mislead; the queue is cleared.
    static var encryptedKey: TLSContextError {
        ERR_clear_error()
        return TLSContextError(input: .privateKey, reason: "an encrypted private key: pass phrases are not supported (decrypt it with openssl pkey)")
    }

    /// `reason` followed by OpenSSL's text for the oldest queued error; the queue is cleared.
    static func openSSL(_ input: Input, _ reason: String) -> TLSContextError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return TLSContextError(input: input, reason: reason) }
        return TLSContextError(input: input, reason: "\(reason): \(TLSErrorText.describe(code))")
    }
}

/// OpenSSL error codes as text.
package enum TLSErrorText {
    /// The reason part of `ERR_error_string_n` ("key values mismatch"), or the system error's
    /// text for an errno carried in the code.
    package static func describe(_ code: UInt) -> String {
        if let reason = ERR_reason_error_string(code) { return String(cString: reason) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// Settings both context kinds share: TLS 1.2 and later, no renegotiation or compression, and
/// an EOF without close_notify reported as an end of stream (HTTP framing says whether the
/// data was complete; libevent then reports it as EOF instead of an error) — on the server
/// side; the client side takes it back (`TLSClientContext`: a close-delimited response).
enum TLSContextSettings {
    /// TLS 1.2 suites: ECDHE key exchange with AEAD ciphers only (forward secrecy, no CBC, no RSA
    /// key transport), ECDSA before RSA, AES-GCM before ChaCha20.
    static let tls12Ciphers = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")
    /// TLS 1.3 suites (all three are AEAD; this is OpenSSL's default order, written down so a
    /// change of defaults cannot weaken it).
    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
    /// The application protocols spoken (HTTP/1.1 preferred), in ALPN wire form (length-prefixed).
    static let alpnHTTP11: [UInt8] = [8] + Array("http/1.1".utf8)
    static let alpnHTTP10: [UInt8] = [8] + Array("http/1.0".utf8)

    /// A new `SSL_CTX` for `method` with the shared settings; the caller owns it.
    static func makeContext(_ method: OpaquePointer?) throws(TLSContextError) -> OpaquePointer {
        guard let method, let context = SSL_CTX_new(method) else {
            throw .openSSL(.library, "SSL_CTX_new failed")
        }
        guard ag_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION) == 1,
              SSL_CTX_set_cipher_list(context, tls12Ciphers) == 1,
              SSL_CTX_set_ciphersuites(context, tls13Suites) == 1 else {
            SSL_CTX_free(context)
            throw .openSSL(.library, "cannot restrict protocol versions and ciphers")
        }
        SSL_CTX_set_options(context, UInt64(ag_ssl_op_no_renegotiation | ag_ssl_op_no_compression
                                            | ag_ssl_op_ignore_unexpected_eof))
        // Idle keep-alive connections then hold no read/write buffers (~34 KiB each otherwise).
        _ = ag_ssl_ctx_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
        // An encrypted key file is refused: OpenSSL's default callback would ask for a pass
        // phrase on the controlling terminal and block the thread that loads it (a reload then
        // never ends, and SIGTERM waits behind it).
        SSL_CTX_set_default_passwd_cb(context) { _, _, _, _ in -1 }
        return context
    }
}
