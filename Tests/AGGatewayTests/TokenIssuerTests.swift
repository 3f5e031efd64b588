import AGCrypto
import AGFormats
import AGJOSE
import Testing

@testable import AGGateway

/// The token's claims are written straight into the payload (no dictionary): the bytes must be
/// what the claims object serializes to (keys sorted, compact), and the header the signer's.
@Suite struct TokenIssuerTests {
    @Test(arguments: [(String?, String?)((nil, nil)), ("0b6e7f47-7e0c-4f0a-9c7e-2f6d6a1d3c55", #"{"plan":"pro","seats":3}"#)])
    func payloadIsTheSortedClaimsObject(subjectID: String?, subscription: String?) throws {
        let harness = try RouterHarness(tenantExtra: "custom_claims: { region: eu, shard: 7, note: \"x\\\"y/z\" }\n")
        let tenant = harness.tenant
        let keyID = "q+/Z" + String(repeating: "A", count: 40)
        let subscriptionValue = try subscription.map { try JSONValue(parsing: Array($0.utf8)) }
        let issued = try harness.snapshot.tokenIssuer.issue(tenant: tenant, keyID: keyID, subjectID: subjectID,
                                                            subscription: subscriptionValue, nowSeconds: 1_800_000_000,
                                                            random: SecureRandomBuffer())
        let verified = try harness.snapshot.tokenKeys.verifier.verify(issued.token)
        #expect(verified.header.algorithm == "ES256" && verified.header.type == "JWT")
        let jti = try #require(verified.claims["jti"])
        var expected: [String: JSONValue] = [
            "iss": .string(harness.snapshot.gateway.tokens.issuer), "aud": .string(tenant.config.token.audience),
            "sub": .string(keyID), "iat": .integer(1_800_000_000), "nbf": .integer(1_800_000_000),
            "exp": .integer(1_800_000_000 + tenant.config.token.ttl.milliseconds / 1000), "jti": jti,
            "team_id": .string(tenant.config.teamID), "bundle_id": .string(tenant.config.bundleID),
        ]
        if let subjectID { expected["subject_id"] = .string(subjectID) }
        var custom = tenant.config.customClaims
        #expect(custom.count == 3)
        if let subscriptionValue { custom["subscription"] = subscriptionValue }
        expected["custom_claims"] = .object(custom)
        #expect(verified.payload == JSONValue.object(expected).serialized())
        #expect(issued.expiresAt == 1_800_000_000 + tenant.config.token.ttl.milliseconds / 1000)
        // The cached header is the one a per-token header would be.
        let header = Array(issued.token.utf8.prefix { $0 != UInt8(ascii: ".") })
        let signer = harness.snapshot.tokenKeys.signer
        #expect(header == Array(Base64.encodeURL(JSONValue.object(["alg": .string("ES256"), "kid": .string(signer.keyID),
                                                                   "typ": .string("JWT")]).serialized()).utf8))
    }
}
