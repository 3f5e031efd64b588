public import AGFormats
internal import AGJOSE

/// A refresh request JWS whose structure is sound but whose signature and claims are not yet
/// checked: what the caller needs to fetch the device record (and, in the same round trip,
/// whatever it keeps under the server nonce and refresh token).
///
/// Nothing here is trustworthy until `RefreshRequestVerifier.verify` returns.
public struct UnverifiedRefreshRequest: Sendable {
    /// The header `kid`, normalised: the device record to fetch.
    public let keyID: PlatformSSOKeyID
    /// The server nonce claim's value (claim named by `nonce_claim_name`).
    public let serverNonce: String
    /// The `refresh_token` claim.
    public let refreshToken: String

    let jws: JWSCompact
    let claims: [String: JSONValue]
}

/// A refresh request whose signature verified with the device's key and whose every claim
/// passed: the caller may now spend the server nonce and rotate the refresh token.
public struct VerifiedRefreshRequest: Sendable, Equatable {
    /// The device, by its signing key id.
    public let keyID: PlatformSSOKeyID
    /// The server nonce to spend (once).
    public let serverNonce: String
    /// The refresh token to rotate.
    public let refreshToken: String
    /// The request's `nonce`: echoed in the id_token.
    public let nonce: String
    /// The request's scopes (`openid` among them).
    public let scopes: [String]
    /// The `aud` that matched, without query and fragment.
    public let audience: String
    /// `iat` and `exp`, in seconds.
    public let issuedAt: Double
    public let expiresAt: Double
    /// `jwe_crypto.apv` decoded: the response's PartyVInfo.
    public let partyVInfo: [UInt8]
    /// Every claim, for custom refresh claims a later policy may read.
    public let claims: [String: JSONValue]
}
