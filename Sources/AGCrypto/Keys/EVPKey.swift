internal import COpenSSL
import AGSync

/// Owns one OpenSSL `EVP_PKEY` (public or private key of any type).
///
/// `@unchecked Sendable` invariant: the key is fully built in `init`, never mutated afterwards
/// and freed only in `deinit`. Every signing or verifying call works on its own `EVP_MD_CTX`
/// (a copy of the key's prepared one, taken under its lock), and OpenSSL 3 supports concurrent
/// operations on one `EVP_PKEY` from many threads under exactly that condition, so one parsed
/// key can be shared read-only by all worker threads.
package final class EVPKey: @unchecked Sendable {
    package let pointer: OpaquePointer
    /// `EVP_MD_CTX`s initialized once for SHA-256 signing and verifying with this key, built on
    /// first use. `EVP_DigestSignInit` fetches the digest, the key management and the signature
    /// algorithm from the provider store on every call (locks, hash-table walks: about a tenth
    /// of a P-256 sign); copying a prepared context fetches nothing.
    private let signTemplate = PreparedDigestContext()
    private let verifyTemplate = PreparedDigestContext()

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    // MARK: Parsing

    /// A private key from PEM: PKCS#8 (`PRIVATE KEY`) or a traditional form such as SEC1
    /// (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`). Encrypted PEM is refused, never prompted for.
    static func privateKey(pem: String, operation: String) throws(CryptoError) -> EVPKey {
        let bio = try MemoryBIO(reading: pem, operation: operation)
        guard let key = PEM_read_bio_PrivateKey(bio.pointer, nil, refusePassphrase, nil) else {
            throw .openSSL(operation)
        }
        return EVPKey(taking: key)
    }

    /// A public key from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) block.
    static func publicKey(pem: String, operation: String) throws(CryptoError) -> EVPKey {
        let bio = try MemoryBIO(reading: pem, operation: operation)
        guard let key = PEM_read_bio_PUBKEY(bio.pointer, nil, refusePassphrase, nil) else {
            throw .openSSL(operation)
        }
        return EVPKey(taking: key)
    }

    /// A public key from DER SubjectPublicKeyInfo; trailing bytes are rejected.
    static func publicKey(der: [UInt8], operation: String) throws(CryptoError) -> EVPKey {
        guard der.count <= Int(Int32.max) else { throw .invalidInput(operation, "input too large") }
        let parsed: OpaquePointer?? = withCBytes(der) { base, count in
            var cursor: UnsafePointer<UInt8>? = base
            let key = d2i_PUBKEY(nil, &cursor, count)
            guard let key else { return .some(nil) }
            guard cursor == base + count else {
                EVP_PKEY_free(key)
                return .none
            }
            return .some(key)
        }
        switch parsed {
        case .none: throw .invalidInput(operation, "trailing bytes after SubjectPublicKeyInfo")
        case .some(.none): throw .openSSL(operation)
        case .some(.some(let key)): return EVPKey(taking: key)
        }
    }

    /// A P-256 public key straight from its uncompressed point with `EVP_PKEY_fromdata`, which
    /// rejects points off the curve. Several times cheaper than a SubjectPublicKeyInfo through
    /// OpenSSL 3's decoder framework, and the refresh path imports one key per request.
    static func p256PublicKey(point: [UInt8], operation: String) throws(CryptoError) -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL(operation) }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw .openSSL(operation) }
        var key: OpaquePointer?
        var point = point
        // OSSL_PARAM keeps pointers to its key names and values: every C string must outlive
        // EVP_PKEY_fromdata, so none may be a temporary bridged from a Swift String.
        let status = OSSL_PKEY_PARAM_GROUP_NAME.withCString { groupKey in
            OSSL_PKEY_PARAM_PUB_KEY.withCString { pubKey in
                "prime256v1".withCString { group in
                    point.withUnsafeMutableBytes { bytes -> Int32 in
                        var params = [
                            OSSL_PARAM_construct_utf8_string(groupKey, UnsafeMutablePointer(mutating: group), 0),
                            OSSL_PARAM_construct_octet_string(pubKey, bytes.baseAddress, bytes.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        // EVP_PKEY_PUBLIC_KEY is a compound macro Swift cannot import.
                        let selection = Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS
                                              | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS)
                        return EVP_PKEY_fromdata(context, &key, selection, &params)
                    }
                }
            }
        }
        guard status == 1, let key else { throw .openSSL(operation) }
        return EVPKey(taking: key)
    }

    /// Generates a key of `algorithm` ("EC", "RSA"), letting `configure` set parameters on the
    /// keygen context after `EVP_PKEY_keygen_init`.
    static func generate(algorithm: String, operation: String,
                         configure: (OpaquePointer) -> Int32) throws(CryptoError) -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { throw .openSSL(operation) }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1, configure(context) > 0 else { throw .openSSL(operation) }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw .openSSL(operation) }
        return EVPKey(taking: key)
    }

    // MARK: Properties

    var baseID: Int32 { EVP_PKEY_get_base_id(pointer) }
    var bits: Int32 { EVP_PKEY_get_bits(pointer) }

    /// The curve name of an EC key as OpenSSL spells it (`prime256v1` for P-256).
    var groupName: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &buffer, buffer.count, &length) == 1 else {
            ERR_clear_error()
            return nil
        }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// A big-number parameter (`"n"`, `"e"`, `"qx"`, …) as unsigned big-endian bytes, left-padded
    /// with zeros to `width` when given.
    func bigNumberParameter(_ name: String, width: Int? = nil, operation: String) throws(CryptoError) -> [UInt8] {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, name, &number) == 1, let number else { throw .openSSL(operation) }
        defer { BN_free(number) }
        let natural = Int((BN_num_bits(number) + 7) / 8)
        let size = width ?? natural
        guard natural <= size else { throw .invalidInput(operation, "parameter \(name) too large") }
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            initialized = Int(BN_bn2binpad(number, buffer.baseAddress, Int32(size)))
        }
    }

    // MARK: Export

    func privateKeyPEM(operation: String) throws(CryptoError) -> String {
        let bio = try MemoryBIO(writingFor: operation)
        guard PEM_write_bio_PrivateKey(bio.pointer, pointer, nil, nil, 0, nil, nil) == 1 else {
            throw .openSSL(operation)
        }
        return bio.contents()
    }

    func publicKeyPEM(operation: String) throws(CryptoError) -> String {
        let bio = try MemoryBIO(writingFor: operation)
        guard PEM_write_bio_PUBKEY(bio.pointer, pointer) == 1 else { throw .openSSL(operation) }
        return bio.contents()
    }

    func publicKeyDER(operation: String) throws(CryptoError) -> [UInt8] {
        let length = i2d_PUBKEY(pointer, nil)
        guard length > 0 else { throw .openSSL(operation) }
        var output = [UInt8](repeating: 0, count: Int(length))
        let written = output.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PUBKEY(pointer, &cursor)
        }
        guard written == length else { throw .openSSL(operation) }
        return output
    }

    // MARK: Signatures

    /// Signs `message` with SHA-256 as the message digest (ECDSA: DER signature; RSA: PKCS#1 v1.5).
    func signSHA256<M: Sequence>(_ message: M, operation: String) throws(CryptoError) -> [UInt8] where M.Element == UInt8 {
        guard let context = signTemplate.copy(initializing: { EVP_DigestSignInit($0, nil, EVP_sha256(), nil, pointer) })
        else { throw .openSSL(operation) }
        defer { EVP_MD_CTX_free(context) }
        var length = Int(EVP_PKEY_get_size(pointer))
        var signature = [UInt8](repeating: 0, count: length)
        let ok = withCBytes(message) { base, count in
            signature.withUnsafeMutableBufferPointer { buffer in
                EVP_DigestSign(context, buffer.baseAddress, &length, base, count)
            }
        }
        guard ok == 1 else { throw .openSSL(operation) }
        signature.removeSubrange(length...)
        return signature
    }

    /// Whether `signature` is valid for `message` with SHA-256 as the message digest. Malformed
    /// signatures are simply invalid; the error queue is left empty either way.
    func verifySHA256<M: Sequence>(signature: [UInt8], message: M) -> Bool where M.Element == UInt8 {
        guard let context = verifyTemplate.copy(initializing: { EVP_DigestVerifyInit($0, nil, EVP_sha256(), nil, pointer) })
        else {
            ERR_clear_error()
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        let result = withCBytes(signature) { signatureBase, signatureCount in
            withCBytes(message) { base, count in
                EVP_DigestVerify(context, signatureBase, signatureCount, base, count)
            }
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}

/// One `EVP_MD_CTX` initialized for an operation on first use and then only copied: each call
/// gets a fresh context of its own (`EVP_DigestSign` and `EVP_DigestVerify` are one-shot), and
/// the prepared one is read only under the lock.
private final class PreparedDigestContext: Sendable {
    /// The prepared context (a pointer: the `Locked` box makes it safe to share).
    private let prepared = Locked<PreparedPointer?>(nil)

    deinit {
        prepared.withLock { if let context = $0 { EVP_MD_CTX_free(context.pointer) } }
    }

    /// A new context copied from the prepared one, preparing it with `initialize` first when
    /// needed (`nil` when OpenSSL fails; the caller frees what it gets).
    func copy(initializing initialize: (OpaquePointer) -> Int32) -> OpaquePointer? {
        prepared.withLock { prepared -> OpaquePointer? in
            if prepared == nil {
                guard let context = EVP_MD_CTX_new() else { return nil }
                guard initialize(context) == 1 else {
                    EVP_MD_CTX_free(context)
                    return nil
                }
                prepared = PreparedPointer(pointer: context)
            }
            guard let source = prepared?.pointer, let context = EVP_MD_CTX_new() else { return nil }
            guard EVP_MD_CTX_copy_ex(context, source) == 1 else {
                EVP_MD_CTX_free(context)
                return nil
            }
            return context
        }
    }
}

/// An OpenSSL pointer kept inside a `Locked` box. `@unchecked Sendable` invariant: only ever used
/// while that lock is held.
private struct PreparedPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Passphrase callback that refuses, so encrypted PEM fails instead of prompting on a terminal.
private func refusePassphrase(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ rwflag: Int32,
                              _ userData: UnsafeMutableRawPointer?) -> Int32 {
    -1
}
