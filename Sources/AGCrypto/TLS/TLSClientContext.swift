internal import COpenSSL
internal import CShims
internal import Foundation

/// A TLS client context (OpenSSL `SSL_CTX`) for connections to https upstreams: which roots
/// are trusted, and the same protocol policy as the server side (TLS 1.2+, AEAD suites,
/// ALPN `http/1.1`). Every connection verifies the peer's chain and its name.
///
/// Built once per configuration snapshot and trust source, shared by every worker thread.
/// `@unchecked Sendable` invariant: configured in `init`, never changed afterwards; `SSL_new`
/// on it is thread-safe and every connection holds its own reference.
public final class TLSClientContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Names the roots trusted: `system`, or `sha256:<hex>` of a CA file's bytes. Pooled
    /// connections are shared only between contexts with equal identities, so a reload that
    /// keeps the same roots keeps the warm connections.
    public let trustIdentity: String

    /// Trusts the system store (`SSL_CTX_set_default_verify_paths`) when
    /// `trustedCertificatesFile` is nil, otherwise only the PEM certificates in that file.
    public init(trustedCertificatesFile: String? = nil) throws(TLSContextError) {
        let context = try TLSContextSettings.makeContext(TLS_client_method())
        // An upstream's EOF without close_notify is an error here, not an end of stream: a
        // response whose body ends with the connection is complete only after close_notify
        // (RFC 9112 section 9.8), so a cut one is passed on cut, never as whole.
        SSL_CTX_clear_options(context, UInt64(ag_ssl_op_ignore_unexpected_eof))
        do throws(TLSContextError) {
            if let file = trustedCertificatesFile {
                guard let bytes = FileManager.default.contents(atPath: file) else {
                    throw TLSContextError(input: .trustedCertificates, reason: "cannot read the file")
                }
                guard SSL_CTX_load_verify_file(context, file) == 1 else {
                    throw .openSSL(.trustedCertificates, "no PEM certificate in the file")
                }
                trustIdentity = "sha256:" + SHA256.hash(Array(bytes)).map { String(format: "%02x", $0) }.joined()
            } else {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    throw .openSSL(.trustedCertificates, "cannot load the system certificate store")
                }
                trustIdentity = "system"
            }
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            let alpn = TLSContextSettings.alpnHTTP11
            // SSL_CTX_set_alpn_protos returns 0 on success.
            guard withCBytes(alpn, { SSL_CTX_set_alpn_protos(context, $0, UInt32($1)) }) == 0 else {
                throw .openSSL(.library, "cannot set ALPN")
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        pointer = context
    }

    deinit { SSL_CTX_free(pointer) }

    /// A new `SSL` in client mode for a connection to `host` (a DNS name, or an IP literal
    /// without brackets), or nil when OpenSSL refuses. A name is sent as SNI and must match the
    /// certificate's DNS names (no partial wildcards, never the subject's common name); an IP literal is not sent as SNI
    /// (RFC 6066 forbids it) and must match an IP address entry. The caller hands it to a
    /// bufferevent that frees it.
    package func makeConnection(host: String) -> OpaquePointer? {
        guard let connection = SSL_new(pointer) else { return nil }
        let configured: Bool
        if host.contains(":") || host.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || ($0 >= 0x30 && $0 <= 0x39) }) {
            configured = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection), host) == 1
        } else {
            // Never the subject's CN in place of DNS names (RFC 9525 section 6.3; OpenSSL falls
            // back to it for a certificate without a DNS subjectAltName).
            SSL_set_hostflags(connection, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT))
            configured = ag_ssl_set_tlsext_host_name(connection, host) == 1 && SSL_set1_host(connection, host) == 1
        }
        guard configured else {
            SSL_free(connection)
            ERR_clear_error()
            return nil
        }
        return connection
    }
}
