import AGConfig
import AGFormats
import AGJOSE
import AGHTTP

/// A token whose signature verified, with what every later request needs from it; the
/// per-worker `TokenCache` keeps these so a repeated token costs no signature check.
///
/// Loop thread only (it is mutated in place when its revocation state is checked).
final class VerifiedToken {
    let claims: [String: JSONValue]
    /// base64url of the payload exactly as signed, for the payload header.
    let encodedPayload: String
    /// `exp`, `nbf` (NumericDate seconds); `exp` is required.
    let expiresAt: Double
    let notBefore: Double?
    let issuer: String?
    let audiences: [String]
    let teamID: String?
    let bundleID: String?
    /// `sub`: the App Attest key id (standard base64), the device whose revocation matters.
    let keyID: String?
    /// `RevocationWatcher.epoch` when Redis last confirmed the device was not revoked; -1: never.
    var revocationCheckedEpoch = -1
    /// Claim headers and payload header, computed at first use. One token belongs to one
    /// tenant and the cache is per snapshot, so the mapping cannot change under it.
    var injectedHeaders: [(name: String, value: String)]?

    /// Takes a signature-verified JWT apart; throws when `exp` is missing or a time claim is
    /// not a number. Whether the times hold is checked per request (`TokenClaimsPolicy`).
    init(_ jwt: VerifiedJWT) throws(ProxyAuthFailure) {
        claims = jwt.claims
        encodedPayload = Base64.encodeURL(jwt.payload)
        for name in ["exp", "nbf", "iat"] {
            guard let value = jwt.claims[name] else {
                if name == "exp" { throw .invalid("the token has no exp claim") }
                continue
            }
            guard value.doubleValue != nil else { throw .invalid("the \(name) claim is not a number") }
        }
        expiresAt = jwt.claims["exp"]?.doubleValue ?? 0
        notBefore = jwt.claims["nbf"]?.doubleValue
        issuer = jwt.claims["iss"]?.stringValue
        switch jwt.claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let values)?: audiences = values.compactMap(\.stringValue)
        default: audiences = []
        }
        teamID = jwt.claims["team_id"]?.stringValue
        bundleID = jwt.claims["bundle_id"]?.stringValue
        keyID = jwt.claims["sub"]?.stringValue
    }

    /// The tenant the token names, as `TEAMID.bundle.id`.
    var appID: String? {
        guard let teamID, let bundleID else { return nil }
        return teamID + "." + bundleID
    }
}

/// Why a token is refused; each maps to one contract error.
enum ProxyAuthFailure: Error, Equatable {
    case missing
    case invalid(String)
    case expired
    case tenantMismatch
    case revoked

    var error: GatewayError {
        switch self {
        case .missing: .tokenMissing
        case .invalid(let why): .tokenInvalid(why)
        case .expired: .tokenExpired
        case .tenantMismatch: .tokenTenantMismatch
        case .revoked: .deviceRevoked
        }
    }
}

/// The checks a cached token goes through on every request; pure, with the clock injected.
struct TokenClaimsPolicy: Sendable {
    let issuer: String
    /// `tokens.leeway` in seconds.
    let leeway: Double

    /// `exp`/`nbf` with leeway, then `iss`, then the token's tenant, then `aud`. The tenant is
    /// compared before the audience so another app's token is reported as such rather than
    /// as merely invalid.
    func check(_ token: VerifiedToken, teamID: String, bundleID: String, audience: String, now: Double) throws(ProxyAuthFailure) {
        guard now < token.expiresAt + leeway else { throw .expired }
        if let notBefore = token.notBefore, now < notBefore - leeway { throw .invalid("the token is not valid yet") }
        guard token.issuer == issuer else { throw .invalid("the token was not issued by this gateway") }
        guard token.teamID == teamID, token.bundleID == bundleID else { throw .tenantMismatch }
        guard token.audiences.contains(audience) else { throw .invalid("the token is meant for another audience") }
        guard let keyID = token.keyID, !keyID.isEmpty else { throw .invalid("the token names no device") }
    }
}

/// Finds the token in a request.
enum BearerToken {
    /// The token in `header`: for `Authorization`, `Bearer <token>` (scheme in any case); for
    /// another header, the raw token or the same `Bearer` form. Anything else, including an
    /// `Authorization` of another scheme, counts as missing; the field sent twice is invalid.
    static func extract(from headers: HTTPFields, header: String) throws(ProxyAuthFailure) -> String {
        let values = headers.values(header)
        guard let value = values.first else { throw .missing }
        guard values.count == 1 else { throw .invalid("the token header is present more than once") }
        let trimmed = value.trimmingASCIIWhitespace()
        if trimmed.utf8.count > 7, trimmed.prefix(7).equalsIgnoringASCIICase("Bearer ") {
            let token = trimmed.dropFirst(7).trimmingASCIIWhitespace()
            guard !token.isEmpty else { throw .missing }
            return String(token)
        }
        guard !header.equalsIgnoringASCIICase("Authorization"), !trimmed.isEmpty,
              !trimmed.equalsIgnoringASCIICase("Bearer") else { throw .missing }
        return String(trimmed)
    }
}

extension StringProtocol {
    fileprivate func trimmingASCIIWhitespace() -> SubSequence {
        var view = self[...]
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return view
    }
}
