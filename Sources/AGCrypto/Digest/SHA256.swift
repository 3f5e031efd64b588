internal import COpenSSL

/// SHA-256 (FIPS 180-4), one shot.
public enum SHA256 {
    /// Length of a SHA-256 digest in bytes.
    public static let byteCount = 32

    /// The SHA-256 digest of `data`.
    ///
    /// Uses OpenSSL's one-shot `SHA256()`, which skips the EVP fetch and context allocation
    /// that dominate the cost of hashing the short inputs this gateway hashes (App IDs,
    /// challenges, authenticator data). Contiguous inputs (arrays, native `String.UTF8View`)
    /// are not copied.
    public static func hash<D: Sequence>(_ data: D) -> [UInt8] where D.Element == UInt8 {
        withCBytes(data) { base, count in
            [UInt8](unsafeUninitializedCapacity: byteCount) { output, initialized in
                _ = COpenSSL.SHA256(base, count, output.baseAddress)
                initialized = byteCount
            }
        }
    }

    /// The SHA-256 digest of the concatenation of `first` and `second`, without building the
    /// concatenation (App Attest: `SHA256(authenticatorData || clientDataHash)`).
    public static func hash(_ first: [UInt8], _ second: [UInt8]) -> [UInt8] {
        var joined = [UInt8]()
        joined.reserveCapacity(first.count + second.count)
        joined.append(contentsOf: first)
        joined.append(contentsOf: second)
        return hash(joined)
    }
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
