import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO

/// Platform SSO: the form body and the Mac's refresh-request JWS.
enum PlatformSSOTargets {
    static let settings = PlatformSSOSettings(clientID: "client-1", audiences: ["https://gw.example/psso/token"],
                                              issuer: "https://gw.example")
    static let deviceKeys = PlatformSSODeviceKeys(signingKey: FuzzFixtures.macSigningKey.publicKey,
                                                  encryptionKey: FuzzFixtures.macEncryptionKey.publicKey)

    /// Every refusal is an OAuth 400 (a malformed form is never a 401 or a 5xx).
    static let form = FuzzTarget(
        name: "psso-form", summary: "URLEncodedForm, the token and nonce forms",
        seeds: {
            ["grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c&platform_sso_version=1.0",
             "grant_type=srv_challenge", "request=x&grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer",
             "a=%zz", "a=1&a=2", "&&", "a=%C3%A9"].map(\.bytes)
        }
    ) { input in
        _ = try? URLEncodedForm(parsing: input)
        do throws(OAuthError) {
            _ = try PlatformSSOTokenForm(body: input)
        } catch {
            if error.status != 400 { return "token form refused with \(error.status) \(error.code)" }
        }
        do throws(OAuthError) {
            _ = try PlatformSSONonceForm(body: input)
        } catch {
            if error.status != 400 { return "nonce form refused with \(error.status) \(error.code)" }
        }
        return nil
    }

    static var kid: String { Base64.encode(SHA256.hash(FuzzFixtures.macSigningKey.publicKey.x963Representation)) }

    static func request(claims: [String: JSONValue]) -> String {
        try! JWSCompact.sign(payload: JSONValue.object(claims).serialized(), key: .es256(FuzzFixtures.macSigningKey),
                             keyID: kid, type: "platformsso-refresh-request+jwt")
    }

    static var validClaims: [String: JSONValue] {
        let apv = ApplePartyInfo.partyVInfo(encryptionKey: FuzzFixtures.macEncryptionKey.publicKey, nonce: Array("n-1".utf8))
        return [
            "iss": "client-1", "client_id": "client-1", "aud": "https://gw.example/psso/token",
            "iat": .string(String(FuzzFixtures.now)), "exp": .integer(FuzzFixtures.now + 300), "nonce": "n-1",
            "request_nonce": "srv-1", "refresh_token": "rt-1", "grant_type": "refresh_token", "scope": "openid",
            "jwe_crypto": ["alg": "ECDH-ES", "enc": "A256GCM", "apv": .string(Base64.encodeURL(apv))],
        ]
    }

    /// Parsing refuses with 400 only; verification with 400 or 401 only; a request that passes
    /// both is one the Mac's key signed, spelled canonically.
    static let jws = FuzzTarget(
        name: "psso-jws", summary: "RefreshRequestVerifier: parse (no key), then signature and every claim",
        seeds: {
            var expired = validClaims
            expired["exp"] = .integer(FuzzFixtures.now - 1000)
            var wrongAudience = validClaims
            wrongAudience["aud"] = ["https://other.example"]
            return [request(claims: validClaims), request(claims: expired), request(claims: wrongAudience)].map(\.bytes)
        }
    ) { input in
        let verifier = RefreshRequestVerifier(settings: settings)
        let token = String(decoding: input, as: UTF8.self)
        let unverified: UnverifiedRefreshRequest
        do throws(OAuthError) {
            unverified = try verifier.parse(token)
        } catch {
            return error.status == 400 ? nil : "parse refused with \(error.status) \(error.code)"
        }
        do throws(OAuthError) {
            _ = try verifier.verify(unverified, device: deviceKeys, now: FuzzFixtures.now)
        } catch {
            return [400, 401].contains(error.status) ? nil : "verify refused with \(error.status) \(error.code)"
        }
        return JOSETargets.canonicalSegments(token).map { "a verified request is not canonical: \($0)" }
    }
}
