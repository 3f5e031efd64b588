internal import COpenSSL

/// SHA-256 (FIPS 180-4), one shot.
public enum SHA256 {
    /// Length of a SHA-256 digest in bytes.
    public static let byteCount = 32

    /// The SHA-256 digest of `data`.
    ///
    /// Hashes with the SHA-256 implementation fetched once per process (`FetchedDigest`): in
    /// OpenSSL 3 the one-shot `SHA256()` is `EVP_Q_digest`, which fetches the implementation
    /// from the provider store (a locked look-up) on every call — a third of the cost of
    /// hashing the short inputs this gateway hashes (challenges, authenticator data).
    /// Contiguous inputs (arrays, native `String.UTF8View`) are not copied.
    public static func hash<D: Sequence>(_ data: D) -> [UInt8] where D.Element == UInt8 {
        withCBytes(data) { base, count in
            digest { context in EVP_DigestUpdate(context, base, count) }
        }
    }

    /// The SHA-256 digest of the concatenation of `first` and `second`, without building the
    /// concatenation (App Attest: `SHA256(authenticatorData || clientDataHash)`).
    public static func hash(_ first: [UInt8], _ second: [UInt8]) -> [UInt8] {
        withCBytes(first) { firstBase, firstCount in
            withCBytes(second) { secondBase, secondCount in
                digest { context in
                    EVP_DigestUpdate(context, firstBase, firstCount) == 1 ? EVP_DigestUpdate(context, secondBase, secondCount) : 0
                }
            }
        }
    }

    /// Runs `update` on a context initialised for SHA-256 and returns the digest.
    private static func digest(_ update: (OpaquePointer) -> Int32) -> [UInt8] {
        let context = EVP_MD_CTX_new()
        defer { EVP_MD_CTX_free(context) }
        return [UInt8](unsafeUninitializedCapacity: byteCount) { output, initialized in
            var length: UInt32 = 0
            let ok = context != nil && EVP_DigestInit_ex2(context, FetchedDigest.sha256.pointer, nil) == 1
                && update(context!) == 1 && EVP_DigestFinal_ex(context, output.baseAddress, &length) == 1
            // SHA-256 only fails on allocation failure, which Swift treats as fatal too.
            precondition(ok && length == UInt32(byteCount), "SHA-256 failed")
            initialized = byteCount
        }
    }
}

/// The SHA-256 implementation, fetched from the default provider once per process.
///
/// `@unchecked Sendable` invariant: an `EVP_MD` is immutable after `EVP_MD_fetch` and OpenSSL
/// lets any number of threads initialise contexts from it; it is never freed.
private final class FetchedDigest: @unchecked Sendable {
    let pointer: OpaquePointer?

    init(name: String) {
        pointer = EVP_MD_fetch(nil, name, nil)
        precondition(pointer != nil, "OpenSSL has no \(name) implementation")
    }

    static let sha256 = FetchedDigest(name: "SHA256")
}

/// HMAC with SHA-256 (RFC 2104).
public enum HMACSHA256 {
    /// Length of an HMAC-SHA-256 tag in bytes.
    public static let byteCount = 32

    /// The HMAC-SHA-256 tag of `data` under `key`.
    public static func authenticate<K: Sequence, D: Sequence>(key: K, data: D) -> [UInt8]
    where K.Element == UInt8, D.Element == UInt8 {
        withCBytes(key) { keyBase, keyCount in
            withCBytes(data) { dataBase, dataCount in
                [UInt8](unsafeUninitializedCapacity: Int(EVP_MAX_MD_SIZE)) { output, initialized in
                    var length: UInt32 = 0
                    let result = HMAC(EVP_sha256(), keyBase, Int32(clamping: keyCount), dataBase, dataCount,
                                      output.baseAddress, &length)
                    // HMAC-SHA-256 only fails on allocation failure, which Swift treats as fatal too.
                    precondition(result != nil && length == UInt32(byteCount), "HMAC-SHA-256 failed")
                    initialized = byteCount
                }
            }
        }
    }

    /// Whether `tag` is the HMAC-SHA-256 of `data` under `key`, compared in constant time.
    public static func isValidAuthenticationCode<K: Sequence, D: Sequence>(_ tag: [UInt8], key: K, data: D) -> Bool
    where K.Element == UInt8, D.Element == UInt8 {
        constantTimeEquals(authenticate(key: key, data: data), tag)
    }
}
