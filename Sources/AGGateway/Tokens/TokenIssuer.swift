import AGConfig
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
    func issue(tenant: Tenant, keyID: String, subjectID: String?, subscription: JSONValue?, nowSeconds issuedAt: Int64) throws -> Issued {
        let lifetime = tenant.config.token.ttl.milliseconds / 1000
        var claims: [String: JSONValue] = [
            "iss": .string(issuer),
            "aud": .string(tenant.config.token.audience),
            "sub": .string(keyID),
            "iat": .integer(issuedAt),
            "nbf": .integer(issuedAt),
            "exp": .integer(issuedAt + lifetime),
            "jti": .string(RequestID.newUUID()),
            "team_id": .string(tenant.config.teamID),
            "bundle_id": .string(tenant.config.bundleID),
        ]
        if let subjectID { claims["subject_id"] = .string(subjectID) }
        var custom = tenant.config.customClaims
        if let subscription { custom["subscription"] = subscription }
        if !custom.isEmpty { claims["custom_claims"] = .object(custom) }
        let token = try keys.signer.sign(claims: claims)
        return Issued(token: token, expiresAt: issuedAt + lifetime)
    }
}
