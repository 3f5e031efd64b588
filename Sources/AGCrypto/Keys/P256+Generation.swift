internal import COpenSSL
import AGSync

extension EVPKey {
    /// A fresh P-256 key pair from a pooled keygen context.
    ///
    /// Creating an `EVP_PKEY_CTX` by name makes OpenSSL look the algorithm up and build the
    /// curve's group again; that cost about three times the key generation itself, and the
    /// Platform SSO response makes one ephemeral key per request. Contexts are taken out of the
    /// pool for the call (so no lock is held while generating) and put back afterwards; each
    /// is used by one thread at a time, as OpenSSL requires.
    static func generateP256(operation: String) throws(CryptoError) -> EVPKey {
        let context = try P256KeygenContexts.shared.take(operation: operation)
        defer { P256KeygenContexts.shared.give(back: context) }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context.pointer, &key) == 1, let key else { throw .openSSL(operation) }
        return EVPKey(taking: key)
    }

    /// The uncompressed public point of an EC key in one parameter read.
    func publicPoint(operation: String) throws(CryptoError) -> [UInt8] {
        var length = 0
        let point = [UInt8](unsafeUninitializedCapacity: P256.x963ByteCount) { buffer, initialized in
            let status = EVP_PKEY_get_octet_string_param(pointer, OSSL_PKEY_PARAM_PUB_KEY, buffer.baseAddress,
                                                         buffer.count, &length)
            initialized = status == 1 ? length : 0
        }
        guard point.count == P256.x963ByteCount, point.first == 0x04 else { throw .openSSL(operation) }
        return point
    }
}

/// One keygen context, initialised for P-256 (`EVP_PKEY_keygen_init` + group name).
///
/// `@unchecked Sendable` invariant: the pool hands a context to one caller at a time and the
/// context is only used between `take` and `give(back:)`.
final class P256KeygenContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init(operation: String) throws(CryptoError) {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL(operation) }
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") > 0 else {
            EVP_PKEY_CTX_free(context)
            throw .openSSL(operation)
        }
        pointer = context
    }

    deinit { EVP_PKEY_CTX_free(pointer) }
}

/// The process's idle P-256 keygen contexts (at most one per thread that generated at once).
final class P256KeygenContexts: Sendable {
    static let shared = P256KeygenContexts()

    private let idle = Locked<[P256KeygenContext]>([])

    func take(operation: String) throws(CryptoError) -> P256KeygenContext {
        if let context = idle.withLock({ $0.popLast() }) { return context }
        return try P256KeygenContext(operation: operation)
    }

    func give(back context: P256KeygenContext) {
        idle.withLock { $0.append(context) }
    }
}
