import AGCrypto
import AGFormats
import AGJOSE

/// JWS/JWT (the gateway's own tokens, Mac requests) and JWE (Platform SSO responses).
enum JOSETargets {
    static let esKey = JWSVerificationKey.es256(FuzzFixtures.tokenKey.publicKey)
    static let rsKey = JWSVerificationKey.rs256(FuzzFixtures.rsaTokenKey.publicKey)

    static let claims: [String: JSONValue] = [
        "iss": "https://attestgate.example", "aud": .string(FuzzFixtures.appID), "sub": "key",
        "iat": .integer(FuzzFixtures.now), "nbf": .integer(FuzzFixtures.now), "exp": .integer(FuzzFixtures.now + 3600),
    ]

    /// A token that verifies must be spelled exactly as signed: its three segments are the
    /// canonical base64url of what they decode to (one token, one spelling).
    static let jws = FuzzTarget(
        name: "jws", summary: "JWSCompact parsing, ES256/RS256 verification, JWTVerifier with claim validity",
        seeds: {
            let es = try! JWTSigner(key: .es256(FuzzFixtures.tokenKey), keyID: "es").sign(claims: claims)
            let rs = try! JWTSigner(key: .rs256(FuzzFixtures.rsaTokenKey), keyID: "rs").sign(claims: claims)
            let unsigned = Base64.encodeURL(#"{"alg":"none"}"#.bytes) + "." + Base64.encodeURL("{}".bytes) + "."
            return [es, rs, unsigned, "a.b.c", "..", es + "."].map(\.bytes)
        }
    ) { input in
        let token = String(decoding: input, as: UTF8.self)
        let verifier = JWTVerifier(keys: ["es": esKey, "rs": rsKey])
        if let verified = try? verifier.verify(token) {
            _ = try? verified.checkValidity(now: Double(FuzzFixtures.now), leeway: 30)
            if let problem = canonicalSegments(token) { return "a verified token is not canonical: \(problem)" }
        }
        if let compact = try? JWSCompact(parsing: token) {
            for key in [esKey, rsKey] where (try? compact.verify(with: key)) != nil {
                if let problem = canonicalSegments(token) { return "a verified JWS is not canonical: \(problem)" }
            }
        }
        return nil
    }

    static let jweRecipient = FuzzFixtures.macEncryptionKey

    /// Decryption succeeds only for ciphertexts made for the recipient, spelled canonically.
    static let jwe = FuzzTarget(
        name: "jwe", summary: "JWECompact parsing and ECDH-ES + A256GCM decryption",
        seeds: {
            let apv = Array("apv-nonce".utf8)
            let token = try! JWECompact.encrypt(#"{"id_token":"x"}"#.bytes, to: jweRecipient.publicKey,
                                                 ephemeralKey: try! P256.PrivateKey(), partyUInfo: Array("apu".utf8),
                                                 partyVInfo: apv, keyID: "kid", type: "platformsso-login-response+jwt")
            return [token, "a.b.c.d.e", "....", token + "A"].map(\.bytes)
        }
    ) { input in
        let token = String(decoding: input, as: UTF8.self)
        guard let compact = try? JWECompact(parsing: token) else { return nil }
        guard (try? compact.decrypt(with: jweRecipient)) != nil else { return nil }
        return canonicalSegments(token).map { "a decrypted JWE is not canonical: \($0)" }
    }

    /// nil when every segment is the canonical base64url of its bytes.
    static func canonicalSegments(_ token: String) -> String? {
        for (index, segment) in token.split(separator: ".", omittingEmptySubsequences: false).enumerated() {
            guard let bytes = Base64.decodeURL(segment) else { return "segment \(index) is not base64url" }
            guard Base64.encodeURL(bytes) == segment else { return "segment \(index) has another spelling" }
        }
        return nil
    }
}
