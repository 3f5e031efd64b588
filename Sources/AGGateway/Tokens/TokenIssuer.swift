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

    /// Signs a token for device `keyID` of `tenant`, linked to `subjectID` with `subscription`.
    ///
    /// The claims are written straight into the payload, in the sorted key order that
    /// `JSONValue` serialization gives an object (the same bytes as the dictionary would
    /// serialize to, `TokenIssuerTests` checks), without building and sorting a dictionary.
    func issue(tenant: Tenant, keyID: String, subjectID: String?, subscription: JSONValue?, nowSeconds issuedAt: Int64) throws -> Issued {
        let lifetime = tenant.config.token.ttl.milliseconds / 1000
        var custom = tenant.config.customClaims
        if let subscription { custom["subscription"] = subscription }
        var claims = JSONObjectWriter()
        claims.add("aud", JSONValue.string(tenant.config.token.audience))
        claims.add("bundle_id", JSONValue.string(tenant.config.bundleID))
        if !custom.isEmpty { claims.add("custom_claims", JSONValue.object(custom)) }
        claims.add("exp", JSONValue.integer(issuedAt + lifetime))
        claims.add("iat", JSONValue.integer(issuedAt))
        claims.add("iss", JSONValue.string(issuer))
        claims.add("jti", JSONValue.string(RequestID.newUUID()))
        claims.add("nbf", JSONValue.integer(issuedAt))
        claims.add("sub", JSONValue.string(keyID))
        if let subjectID { claims.add("subject_id", JSONValue.string(subjectID)) }
        claims.add("team_id", JSONValue.string(tenant.config.teamID))
        let token = try keys.signer.sign(payload: claims.finishedBytes())
        return Issued(token: token, expiresAt: issuedAt + lifetime)
    }
}
