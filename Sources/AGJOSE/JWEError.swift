/// Why a JWE could not be parsed, decrypted or built.
///
/// Kept apart from `JOSEError` so that code switching over JWS failures is not affected.
public enum JWEError: Error, Sendable, Equatable {
    /// Not five base64url segments, an undecodable or ill-typed header, a wrong IV or tag
    /// length, or a token longer than the parser accepts.
    case malformed(String)
    /// `alg` is not `ECDH-ES` or `enc` is not `A256GCM` (names the offending value).
    case unsupportedAlgorithm(String)
    /// The header lists `crit` extensions or asks for compression (`zip`).
    case unsupportedHeader(String)
    /// `epk` is not a P-256 public JWK.
    case invalidKey(String)
    /// The header's `apv` differs from the PartyVInfo the recipient expects.
    case partyVInfoMismatch
    /// The authentication tag does not verify: wrong key, or anything in the token altered.
    case decryptionFailed
    /// Key agreement or encryption failed inside OpenSSL (its error text).
    case cryptoFailure(String)
}
