/// Why a JWS/JWT was refused or could not be produced.
public enum JOSEError: Error, Sendable, Equatable {
    /// Not three base64url segments, undecodable JSON, missing `alg`, wrong member types, or a
    /// token longer than the verifier accepts.
    case malformed(String)
    /// `alg` is not ES256 or RS256 (this includes `none` and every HMAC algorithm).
    case unsupportedAlgorithm(String)
    /// The header's `alg` is not the algorithm of the key selected by `kid`.
    case algorithmMismatch(header: String, key: JWSAlgorithm)
    /// No configured key has this `kid` (nil when the header has none).
    case unknownKeyID(String?)
    /// The header's `typ` is not the expected type.
    case unexpectedType(String?)
    /// The header lists `crit` extensions, none of which this implementation understands.
    case unsupportedCriticalHeader
    /// The signature does not verify.
    case invalidSignature
    /// A JWK that is not a supported public key.
    case invalidKey(String)
    /// The signing key failed (OpenSSL error text).
    case signingFailed(String)
}
