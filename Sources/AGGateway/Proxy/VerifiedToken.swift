import AGFormats
import AGJOSE
import AGHTTP
import AGPolicy

/// A token whose signature verified, with what every later request needs from it; the
/// per-worker `TokenCache` keeps these so a repeated token costs no signature check.
///
/// Loop thread only (its injected headers are filled in at first use).
@dynamicMemberLookup
final class VerifiedToken {
    let verified: TokenClaims
    /// Claim headers and payload header, computed at first use. One token belongs to one
    /// tenant and the cache is per snapshot, so the mapping cannot change under it.
    var injectedHeaders: [(name: String, value: String)]?
    /// The tenant's device epoch (`DeviceEpoch`) at which this worker last found the token's
    /// device record in good standing; nil before the first check and after a refusal.
    var checkedEpoch: String?

    /// Takes a signature-verified JWT apart; throws when `exp` is missing or a time claim is
    /// not a number. Whether the times hold is checked per request (`TokenClaimsPolicy`).
    init(_ jwt: VerifiedJWT) throws(ProxyAuthFailure) {
        verified = try TokenClaims(claims: jwt.claims, payload: jwt.payload)
    }

    subscript<Value>(dynamicMember keyPath: KeyPath<TokenClaims, Value>) -> Value {
        verified[keyPath: keyPath]
    }
}

/// The proxy's name for a token refusal.
typealias ProxyAuthFailure = TokenRejection

extension TokenRejection {
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
