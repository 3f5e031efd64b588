import AGCrypto
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// `redis.*`, `tokens.*` and `challenge.ttl`.
extension ConfigKeyEffects {
    static let store: [KeyEffect] = [
        KeyEffect(key: "gateway:redis.url", observed: "challenges are stored in the configured database") {
            let probe = try KeyProbe(gatewayYAML: "redis:\n  url: \(shared(database: 7))\n  timeout: 250ms\n")
            let challenge = try #require(try probe.challenge().json["challenge"] as? String)
            let key = "ag:{\(probe.appID)}:ch:\(challenge)"
            #expect(try RedisCLI.run(shared(database: 7), "EXISTS", key) == "1")
            #expect(try RedisCLI.run(shared(database: 0), "EXISTS", key) == "0")
        },
        KeyEffect(key: "gateway:redis.timeout", observed: "a frozen Redis costs a request 600ms, then 503") {
            try await RedisServer.withPrivate { redis in
                let probe = try KeyProbe(gatewayYAML: "redis:\n  url: redis://127.0.0.1:\(redis.port)/0\n  timeout: 600ms\n",
                                         redisURL: "redis://127.0.0.1:\(redis.port)/0")
                #expect(try eventually { try probe.gateway.send("GET", "/readyz").status == 200 })
                redis.pause()
                defer { redis.resume() }
                var response: TestResponse?
                let elapsed = try seconds { response = try probe.challenge() }
                #expect(response?.status == 503)
                #expect(response?.code == "store_unavailable")
                #expect(elapsed >= 0.55 && elapsed < 2, "took \(elapsed)s")
            }
        },
    ]

    /// The shared test Redis, on another database.
    static func shared(database: Int) -> String {
        let url = TestGateway.sharedRedisURL
        guard let slash = url.lastIndex(of: "/"), url[url.index(after: slash)...].allSatisfy(\.isNumber) else { return url + "/\(database)" }
        return url[...slash] + String(database)
    }

    static let tokens: [KeyEffect] = [
        KeyEffect(key: "gateway:tokens.issuer", observed: "the iss claim of an issued token") {
            let probe = try KeyProbe(gatewayYAML: issuerSection(issuer: "https://issuer.probe", ttl: "1h", leeway: "30s"))
            #expect(try probe.token().claims["iss"]?.stringValue == "https://issuer.probe")
        },
        KeyEffect(key: "gateway:tokens.ttl", observed: "exp - iat of an issued token") {
            let probe = try KeyProbe(gatewayYAML: issuerSection(issuer: "https://attestgate.test", ttl: "2m", leeway: "30s"))
            let claims = try probe.token().claims
            #expect((claims["exp"]?.integerValue ?? 0) - (claims["iat"]?.integerValue ?? 0) == 120)
        },
        KeyEffect(key: "gateway:tokens.leeway", observed: "a token 10s past exp is proxied with 60s leeway, refused with 0s") {
            for (leeway, status) in [("60s", 200), ("0s", 401)] {
                let time = ManualTime()
                let probe = try KeyProbe(gatewayYAML: issuerSection(issuer: "https://attestgate.test", ttl: "1m", leeway: leeway), time: time)
                let token = try probe.token().jws
                time.advance(.seconds(70))
                let response = try probe.proxied("/api/x", token: token)
                #expect(response.status == status, "leeway \(leeway): \(response.text)")
                if status == 401 { #expect(response.code == "token_expired") }
            }
        },
        KeyEffect(key: "gateway:tokens.keys[].kid", observed: "the kid of issued tokens and of the JWKS") {
            let probe = try KeyProbe(keys: [("probe-kid-9", "ES256", true)])
            #expect(try probe.token().header["kid"]?.stringValue == "probe-kid-9")
            #expect(try probe.gateway.send("GET", "/.well-known/jwks.json").text.contains(#""kid":"probe-kid-9""#))
        },
        KeyEffect(key: "gateway:tokens.keys[].algorithm", observed: "RS256 tokens and an RSA key in the JWKS") {
            let probe = try KeyProbe(keys: [("rs", "RS256", true)])
            #expect(try probe.token().header["alg"]?.stringValue == "RS256")
            #expect(try probe.gateway.send("GET", "/.well-known/jwks.json").text.contains(#""kty":"RSA""#))
        },
        KeyEffect(key: "gateway:tokens.keys[].file", observed: "the JWKS publishes the public half of the key file") {
            let probe = try KeyProbe(keys: [("filekey", "ES256", true)])
            let pem = try TestFile.text(probe.gateway.directory + "/keys/filekey.pem")
            let key = try P256.PrivateKey(pemRepresentation: pem).publicKey
            let jwks = try probe.gateway.send("GET", "/.well-known/jwks.json").text
            #expect(jwks.contains(Base64.encodeURL(key.x)), "\(jwks)")
            #expect(jwks.contains(Base64.encodeURL(key.y)))
        },
        KeyEffect(key: "gateway:tokens.keys[].active", observed: "the active key of two signs the tokens") {
            let probe = try KeyProbe(keys: [("old", "ES256", false), ("new", "ES256", true)])
            #expect(try probe.token().header["kid"]?.stringValue == "new")
        },
        KeyEffect(key: "gateway:challenge.ttl", observed: "the challenge answer's ttl and expiresAt") {
            let probe = try KeyProbe(gatewayYAML: "challenge:\n  ttl: 2m\n")
            #expect(try probe.challenge().json["ttl"] as? Int == 120)
        },
    ]

    /// The `tokens` section with the probe's default key (`keys/test-es256.pem`).
    static func issuerSection(issuer: String, ttl: String, leeway: String) -> String {
        """
        tokens:
          issuer: \(issuer)
          ttl: \(ttl)
          leeway: \(leeway)
          keys:
            - { kid: test-es256, algorithm: ES256, file: keys/test-es256.pem, active: true }

        """
    }
}
