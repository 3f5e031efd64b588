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
    var injectedHeaders: InjectedHeaders?
    /// The tenant's device epoch (`DeviceEpoch`) at which this worker last found the token's
    /// device record in good standing; nil before the first check and after a refusal.
    var checkedEpoch: String?
    /// The Redis key of the token's device record, made at first use. The claims check ties a
    /// token to one tenant, so the key cannot differ between its uses.
    var deviceKey: String?
    /// The tenant (of this token's snapshot: the cache is per snapshot) for which the whole
    /// claims check passed: issuer, tenant, audience and device cannot change for it, so later
    /// requests for the same tenant check only the times. Held strongly: an identity that could
    /// be a freed tenant's address reused would let another tenant skip the check.
    var claimsCheckedFor: Tenant?

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

/// The header a tenant's token arrives in, prepared once per snapshot (`ForwardHeaderPolicy`).
struct TokenHeaderName: Sendable {
    let text: String
    /// `Authorization`: the `Bearer` scheme is required, and the parser's interned name is used.
    let isAuthorization: Bool
    fileprivate let bytes: [UInt8]

    init(_ text: String) {
        self.text = text
        bytes = Array(text.utf8)
        isAuthorization = text.equalsIgnoringASCIICase("Authorization")
    }

    static let authorization = TokenHeaderName("Authorization")
}

/// Finds the token in a request, on the head's bytes: its range there, so that a cached token
/// is recognised without a `String` made of it (`TokenCache`); `extract` makes the `String`.
enum BearerToken {
    private static var scheme: StaticString { "bearer " }
    private static var bareScheme: StaticString { "bearer" }

    /// The token in `header`: for `Authorization`, `Bearer <token>` (scheme in any case); for
    /// another header, the raw token or the same `Bearer` form. Anything else, including an
    /// `Authorization` of another scheme, counts as missing; the field sent twice is invalid.
    static func range(in headers: HTTPFields, header: TokenHeaderName) throws(ProxyAuthFailure) -> Range<Int> {
        var found: Range<Int>?
        for field in headers {
            let matches = header.isAuthorization ? field.name == .authorization
                                                 : headers.equalsIgnoringCase(field.nameRange, header.bytes)
            guard matches else { continue }
            guard found == nil else { throw .invalid("the token header is present more than once") }
            found = field.valueRange
        }
        guard let value = found else { throw .missing }
        let bytes = headers.storage.span
        var start = value.lowerBound, end = value.upperBound
        while start < end, isBlank(bytes[start]) { start += 1 }
        while end > start, isBlank(bytes[end - 1]) { end -= 1 }
        if end - start > scheme.utf8CodeUnitCount, headers.equalsIgnoringCase(start..<start + scheme.utf8CodeUnitCount, scheme) {
            start += scheme.utf8CodeUnitCount
            while start < end, isBlank(bytes[start]) { start += 1 }
            guard start < end else { throw .missing }
            return start..<end
        }
        guard !header.isAuthorization, start < end, !headers.equalsIgnoringCase(start..<end, bareScheme) else { throw .missing }
        return start..<end
    }

    /// The token in `header` (see `range`), as a `String`.
    static func extract(from headers: HTTPFields, header: TokenHeaderName) throws(ProxyAuthFailure) -> String {
        String(decoding: headers.storage[try range(in: headers, header: header)], as: UTF8.self)
    }

    /// `extract` for a header named by text (tests, and callers without a prepared name).
    static func extract(from headers: HTTPFields, header: String) throws(ProxyAuthFailure) -> String {
        try extract(from: headers, header: TokenHeaderName(header))
    }

    private static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
}
