internal import AGFormats
internal import AGJOSE

/// Verifies Platform SSO refresh requests (DESIGN section 11 "Request checks") in two steps,
/// so that the caller can look the device up in between:
///
/// 1. `parse(_:)` — structure only, no key: the JWS, its `typ` (anything but a refresh request
///    is 400 `unsupported_grant_type`), `alg` ES256, a normalisable `kid`, a 64-byte `r‖s`
///    signature, a JSON-object payload with the server nonce and `refresh_token` strings.
/// 2. `verify(_:device:now:)` — with the device's registered keys: the signature (401), then
///    every claim (400 `invalid_request`).
///
/// Neither step touches state. The caller spends the nonce and rotates the refresh token only
/// after step 2, turning what its store finds into `OAuthError.nonce(_:)`,
/// `.refreshToken(_:)`, `.deviceUnknown` or `.deviceDisabled`.
public struct RefreshRequestVerifier: Sendable {
    /// The JWS `typ` of a refresh request.
    public static let requestType = "platformsso-refresh-request+jwt"
    /// Longest accepted server nonce or refresh token claim, in bytes (both are far shorter when
    /// the gateway issued them; the bound keeps store keys small).
    public static let maximumTokenClaimLength = 512

    public let settings: PlatformSSOSettings
    /// `settings.audiences` without query and fragment, built once.
    private let audiences: Set<String>

    public init(settings: PlatformSSOSettings) {
        self.settings = settings
        self.audiences = Set(settings.audiences.map(RefreshClaims.withoutQueryAndFragment))
    }

    /// Step 1: parses `jws` without any key.
    public func parse(_ jws: String) throws(OAuthError) -> UnverifiedRefreshRequest {
        let compact: JWSCompact
        do {
            compact = try JWSCompact(parsing: jws)
        } catch {
            switch error {
            case .malformed(let reason): throw .invalidRequest("malformed JWS: \(reason)")
            case .unsupportedCriticalHeader: throw .invalidRequest("the JWS has a crit header")
            default: throw .invalidRequest("malformed JWS")
            }
        }
        let header = compact.header
        // The type decides what the request is before anything else is judged: a login or key
        // request is a grant this endpoint does not serve, however it is built.
        guard header.hasType(Self.requestType) else {
            throw .unsupportedGrantType("JWS typ must be \(Self.requestType)")
        }
        guard header.algorithm == "ES256" else { throw .invalidRequest("JWS alg must be ES256") }
        guard let kid = header.keyID else { throw .invalidRequest("JWS kid is missing") }
        guard let keyID = PlatformSSOKeyID(normalizing: kid) else {
            throw .invalidRequest("JWS kid is not the base64 SHA-256 of a key")
        }
        guard compact.signature.count == 64 else {
            throw .invalidRequest("the ES256 signature must be 64 bytes of r||s, not \(compact.signature.count)")
        }
        // Its own reason when it is no JSON at all (nested deeper than 16 levels, a repeated
        // member name, a syntax error): "not a JSON object" misled a sweep's client about both.
        let json: JSONValue
        do throws(JSONParseError) {
            json = try JSONValue(parsing: compact.payload, maximumDepth: 16)
        } catch {
            throw .invalidRequest("the JWS payload is not valid JSON (at most 16 levels deep, no repeated member name): \(error.reason)")
        }
        guard case .object(let claims) = json else { throw .invalidRequest("the JWS payload is not a JSON object") }
        let serverNonce = try Self.tokenClaim(settings.nonceClaimName, in: claims)
        let refreshToken = try Self.tokenClaim("refresh_token", in: claims)
        return UnverifiedRefreshRequest(keyID: keyID, serverNonce: serverNonce, refreshToken: refreshToken,
                                        jws: compact, claims: claims)
    }

    /// Step 2: checks the signature with `device.signingKey` and every claim at `now` (Unix seconds).
    public func verify(_ request: UnverifiedRefreshRequest, device: PlatformSSODeviceKeys,
                       now: Int64) throws(OAuthError) -> VerifiedRefreshRequest {
        // A store that returned another device's record must not make its key count.
        guard device.keyID == request.keyID else { throw .deviceUnknown }
        do {
            try request.jws.verify(with: .es256(device.signingKey))
        } catch {
            throw .signatureInvalid
        }
        let claims = RefreshClaims(claims: request.claims)
        try claims.requireEqual("client_id", settings.clientID)
        try claims.requireEqual("iss", settings.clientID)
        let audience = try claims.audience(in: audiences)
        let (issuedAt, expiresAt) = try claims.times(now: now, skew: settings.clockSkew)
        let scopes = try claims.scopes()
        try claims.requireEqual("grant_type", "refresh_token")
        let nonce = try claims.nonEmptyString("nonce")
        let partyVInfo = try claims.partyVInfo(encryptionKey: device.encryptionKey, nonce: nonce)
        return VerifiedRefreshRequest(keyID: request.keyID, serverNonce: request.serverNonce,
                                      refreshToken: request.refreshToken, nonce: nonce, scopes: scopes,
                                      audience: audience, issuedAt: issuedAt, expiresAt: expiresAt,
                                      partyVInfo: partyVInfo, claims: request.claims)
    }

    private static func tokenClaim(_ name: String, in claims: [String: JSONValue]) throws(OAuthError) -> String {
        guard let value = claims[name] else { throw .invalidRequest("claim \(name) is missing") }
        guard let text = value.stringValue, !text.isEmpty else { throw .invalidRequest("claim \(name) must be a non-empty string") }
        guard text.utf8.count <= maximumTokenClaimLength else {
            throw .invalidRequest("claim \(name) is longer than \(maximumTokenClaimLength) bytes")
        }
        return text
    }
}
