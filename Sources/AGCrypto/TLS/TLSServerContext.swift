internal import COpenSSL
internal import CShims
internal import Glibc

/// A TLS server context (OpenSSL `SSL_CTX`): the certificate chain and key a listener presents,
/// checked when built, and the protocol policy every connection it accepts follows.
///
/// Policy: TLS 1.2 and 1.3 only; ECDHE with AEAD ciphers for TLS 1.2 and the three TLS 1.3
/// suites; the server's cipher order wins; no renegotiation, no compression; ALPN `http/1.1`,
/// else `http/1.0` (as nginx; curl --http1.0 offers only that) — a client that offers ALPN
/// with neither is refused with `no_application_protocol` (RFC 7301 section 3.2) rather than
/// left to speak a protocol the server does not.
///
/// Built once per configuration snapshot and shared by every worker thread.
/// `@unchecked Sendable` invariant: the `SSL_CTX` is fully configured in `init` and never
/// changed afterwards; `SSL_new` on a configured context is thread-safe (it only takes a
/// reference under OpenSSL's lock), and each connection keeps the context alive through its
/// own `SSL`, so connections accepted before a reload keep theirs.
public final class TLSServerContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// When the leaf certificate expires, in seconds since 1970 (for logs and a gauge).
    public let certificateNotAfter: Int64
    /// The leaf certificate's subject, one line (`CN=gateway.example`), for logs.
    public let certificateSubject: String

    /// Loads `certificateChainFile` (PEM, leaf first, then intermediates) and
    /// `privateKeyFile` (PEM), and checks that the key belongs to the leaf.
    public init(certificateChainFile: String, privateKeyFile: String) throws(TLSContextError) {
        let context = try TLSContextSettings.makeContext(TLS_server_method())
        guard SSL_CTX_use_certificate_chain_file(context, certificateChainFile) == 1 else {
            SSL_CTX_free(context)
            throw .openSSL(.certificateChain, "not a PEM certificate chain")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            // OpenSSL checks the pair while loading the key: tell a wrong key from a broken file.
            let mismatch = [ERR_peek_error(), ERR_peek_last_error()].contains { ag_err_get_reason($0) == X509_R_KEY_VALUES_MISMATCH }
            let error = mismatch ? TLSContextError.keyMismatch
                : Self.isEncrypted(privateKeyFile) ? TLSContextError.encryptedKey
                : TLSContextError.openSSL(.privateKey, "not a PEM private key")
            SSL_CTX_free(context)
            throw error
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            SSL_CTX_free(context)
            throw .keyMismatch
        }
        SSL_CTX_set_options(context, UInt64(ag_ssl_op_cipher_server_preference))
        // TLS 1.2 session-ID resumption keeps each session in this cache; OpenSSL's default of
        // 20,480 (~33 MB, found by an independent sweep) is cut to `sessionCacheSize` (~3 MB).
        // Session tickets and TLS 1.3 resumption need no server state.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_SESS_CACHE_SIZE, Self.sessionCacheSize, nil)
        SSL_CTX_set_alpn_select_cb(context, { _, selected, selectedLength, offered, offeredLength, _ in
            guard let selected, let selectedLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            let list = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
            guard let match = TLSServerContext.find(TLSContextSettings.alpnHTTP11, in: list)
                    ?? TLSServerContext.find(TLSContextSettings.alpnHTTP10, in: list)
            else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            selected.pointee = offered + match
            selectedLength.pointee = UInt8(TLSContextSettings.alpnHTTP11.count - 1)  // both names are 8 bytes
            return SSL_TLSEXT_ERR_OK
        }, nil)
        let leaf = SSL_CTX_get0_certificate(context)
        certificateNotAfter = leaf.flatMap { X509_get0_notAfter($0) }.flatMap(Self.unixTime) ?? 0
        certificateSubject = leaf.flatMap { X509_get_subject_name($0) }.map(Self.oneLine) ?? ""
        pointer = context
    }

    deinit { SSL_CTX_free(pointer) }

    /// Sessions kept for TLS 1.2 session-ID resumption, the oldest dropped first.
    public static let sessionCacheSize = 2048

    /// The context's session cache size, as OpenSSL reports it.
    public var configuredSessionCacheSize: Int {
        SSL_CTX_ctrl(pointer, SSL_CTRL_GET_SESS_CACHE_SIZE, 0, nil)
    }

    /// Whether a PEM key file is encrypted (PKCS#8 `ENCRYPTED PRIVATE KEY`, or a traditional
    /// key with `Proc-Type: 4,ENCRYPTED`), read only to word the refusal.
    static func isEncrypted(_ path: String) -> Bool {
        guard let file = fopen(path, "r") else { return false }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = fread(&buffer, 1, buffer.count - 1, file)
        let text = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
    }

    /// A new `SSL` in server mode for one accepted connection, or nil when OpenSSL is out of
    /// memory. The caller hands it to a bufferevent that frees it.
    package func makeConnection() -> OpaquePointer? {
        SSL_new(pointer)
    }

    /// The offset of the name `wanted` (length-prefixed, as in the list) inside an ALPN protocol
    /// list (length-prefixed names), or nil when the list does not offer it or is malformed.
    static func find(_ wanted: [UInt8], in list: UnsafeBufferPointer<UInt8>) -> Int? {
        var offset = 0
        while offset < list.count {
            let length = Int(list[offset])
            let start = offset + 1
            guard length > 0, start + length <= list.count else { return nil }
            if length == wanted.count - 1, (0..<length).allSatisfy({ list[start + $0] == wanted[$0 + 1] }) {
                return start
            }
            offset = start + length
        }
        return nil
    }

    private static func unixTime(_ time: UnsafePointer<ASN1_TIME>) -> Int64? {
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func oneLine(_ name: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard X509_NAME_oneline(name, &buffer, Int32(buffer.count)) != nil else { return "" }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
