import AGCrypto
import AGPolicy
import AGFormats

/// Mints the gateway's JWTs (DESIGN section 4). Claims without a value are omitted.
struct TokenIssuer {
    let keys: TokenKeys
    let issuer: String

    struct Issued {
        let token: String
        /// Unix seconds.
        let expiresAt: Int64
    }

    /// Signs a token for device `keyID` of `tenant`, linked to `subjectID` with `subscription`;
    /// its `jti` is a version 4 UUID from `random`.
    ///
    /// The claims are written straight into the payload, in the sorted key order that
    /// `JSONValue` serialization gives an object (the same bytes as the dictionary would
    /// serialize to, `TokenIssuerTests` checks), without building and sorting a dictionary.
    func issue(tenant: Tenant, keyID: String, subjectID: String?, subscription: JSONValue?, nowSeconds issuedAt: Int64,
               random: SecureRandomBuffer) throws -> Issued {
        let lifetime = tenant.config.token.ttl.milliseconds / 1000
        var custom = tenant.config.customClaims
        // Stored subscriptions are kept without null members (`withoutNullMembers`); one stored
        // before that rule is cleaned here.
        if let subscription { custom["subscription"] = subscription.withoutNullMembers }
        var claims = JSONObjectWriter(capacity: 512)
        claims.add("aud", tenant.config.token.audience)
        claims.add("bundle_id", tenant.config.bundleID)
        if !custom.isEmpty { claims.add("custom_claims", JSONValue.object(custom)) }
        claims.add("exp", Int(issuedAt + lifetime))
        claims.add("iat", Int(issuedAt))
        claims.add("iss", issuer)
        var ids = random
        claims.add("jti", RequestID.newUUID(using: &ids))
        claims.add("nbf", Int(issuedAt))
        claims.add("sub", keyID)
        if let subjectID { claims.add("subject_id", subjectID) }
        claims.add("team_id", tenant.config.teamID)
        let token = try keys.signer.sign(payload: claims.finishedBytes())
        return Issued(token: token, expiresAt: issuedAt + lifetime)
    }
}

extension JSONValue {
    /// The value with every object member whose value is null left out, at any depth: a claim
    /// without a value is omitted, never null (DESIGN section 4). A null array element is a
    /// value and stays.
    var withoutNullMembers: JSONValue {
        switch self {
        case .object(let members):
            var kept: [String: JSONValue] = [:]
            kept.reserveCapacity(members.count)
            for (key, value) in members where value != .null { kept[key] = value.withoutNullMembers }
            return .object(kept)
        case .array(let items):
            return .array(items.map(\.withoutNullMembers))
        default:
            return self
        }
    }
}
