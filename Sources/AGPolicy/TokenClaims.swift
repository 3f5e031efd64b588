import AGConfig
import AGFormats

/// The claims of a signature-verified token, taken apart once: what every later request
/// checks (`TokenClaimsPolicy`) and forwards (`ClaimHeaderMapper`).
public struct TokenClaims: Sendable {
    public let claims: [String: JSONValue]
    /// base64url of the payload exactly as signed, for the payload header.
    public let encodedPayload: String
    /// `exp`, `nbf` (NumericDate seconds); `exp` is required.
    public let expiresAt: Double
    public let notBefore: Double?
    public let issuer: String?
    public let audiences: [String]
    public let teamID: String?
    public let bundleID: String?
    /// `sub`: the App Attest key id (standard base64), the device whose revocation matters.
    public let keyID: String?
    /// Takes a signature-verified JWT apart; throws when `exp` is missing or a time claim is
    /// not a number. Whether the times hold is checked per request (`TokenClaimsPolicy`).
    public init(claims: [String: JSONValue], payload: [UInt8]) throws(TokenRejection) {
        self.claims = claims
        encodedPayload = Base64.encodeURL(payload)
        for name in ["exp", "nbf", "iat"] {
            guard let value = claims[name] else {
                if name == "exp" { throw .invalid("the token has no exp claim") }
                continue
            }
            guard value.doubleValue != nil else { throw .invalid("the \(name) claim is not a number") }
        }
        expiresAt = claims["exp"]?.doubleValue ?? 0
        notBefore = claims["nbf"]?.doubleValue
        issuer = claims["iss"]?.stringValue
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let values)?: audiences = values.compactMap(\.stringValue)
        default: audiences = []
        }
        teamID = claims["team_id"]?.stringValue
        bundleID = claims["bundle_id"]?.stringValue
        keyID = claims["sub"]?.stringValue
    }

    /// The tenant the token names, as `TEAMID.bundle.id`.
    public var appID: String? {
        guard let teamID, let bundleID else { return nil }
        return teamID + "." + bundleID
    }
}

/// Why a token is refused; each maps to one contract error.
public enum TokenRejection: Error, Equatable, Sendable {
    case missing
    case invalid(String)
    case expired
    case tenantMismatch
    case revoked
}

/// The checks a cached token goes through on every request; pure, with the clock injected.
public struct TokenClaimsPolicy: Sendable {
    public let issuer: String
    /// `tokens.leeway` in seconds.
    public let leeway: Double

    public init(issuer: String, leeway: Double) {
        self.issuer = issuer
        self.leeway = leeway
    }

    /// `exp`/`nbf` with leeway, then `iss`, then the token's tenant, then `aud`. The tenant is
    /// compared before the audience so another app's token is reported as such rather than
    /// as merely invalid.
    public func check(_ token: TokenClaims, teamID: String, bundleID: String, audience: String, now: Double) throws(TokenRejection) {
        try checkTimes(expiresAt: token.expiresAt, notBefore: token.notBefore, now: now)
        guard token.issuer == issuer else { throw .invalid("the token was not issued by this gateway") }
        guard token.teamID == teamID, token.bundleID == bundleID else { throw .tenantMismatch }
        guard token.audiences.contains(audience) else { throw .invalid("the token is meant for another audience") }
        guard let keyID = token.keyID, !keyID.isEmpty else { throw .invalid("the token names no device") }
    }

    /// The part of `check` that moves with the clock: `exp` and `nbf` with leeway. The rest
    /// depends only on the token, this policy and the tenant, so a caller that already passed
    /// `check` for the same tenant under the same policy needs only this.
    public func checkTimes(expiresAt: Double, notBefore: Double?, now: Double) throws(TokenRejection) {
        guard now < expiresAt + leeway else { throw .expired }
        if let notBefore, now < notBefore - leeway { throw .invalid("the token is not valid yet") }
    }
}

