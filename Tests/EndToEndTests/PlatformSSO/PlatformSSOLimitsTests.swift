import AGDevice
import AGTestSupport
import Foundation
import Testing

/// Rate limits and Redis failures on the Platform SSO endpoints: 429 `rate_limited` with
/// `Retry-After`, and 503 `temporarily_unavailable` (fail closed) while Redis is down.
@Suite("Platform SSO limits and failures, end to end")
struct PlatformSSOLimitsTests {
    /// On its own Redis: the per-IP bucket of 127.0.0.1 is shared by every test gateway.
    @Test func theNonceEndpointHasAPerIPBucket() async throws {
        try await RedisServer.withPrivate { redis in
            let sso = try PlatformSSOGateway(gatewayYAML: "ip_limits:\n  psso_nonce: 2\n", redisURL: "redis://127.0.0.1:\(redis.port)/0")
            defer { sso.stop() }
            let form: [UInt8] = Array("grant_type=srv_challenge".utf8)
            // A malformed form is refused before the bucket: it takes no token.
            let malformed = try sso.post(Array("grant_type=other".utf8), path: "/psso/nonce")
            #expect(malformed.status == 400 && malformed.oauthError == "unsupported_grant_type")
            let missing = try sso.post(Array("x=1".utf8), path: "/psso/nonce")
            #expect(missing.status == 400 && missing.oauthError == "invalid_request")
            for remaining in ["1", "0"] {
                let response = try sso.post(form, path: "/psso/nonce", headers: [("client-request-id", "abc-1")])
                #expect(response.status == 200)
                #expect(response.header("X-RateLimit-Remaining") == remaining)
                #expect(response.header("client-request-id") == "abc-1")
                #expect(response.header("Cache-Control") == "no-store")
                #expect((response.json["Nonce"] as? String)?.count == 43, "256 bits, base64url")
            }
            let limited = try sso.post(form, path: "/psso/nonce")
            #expect(limited.status == 429)
            #expect(limited.oauthError == "rate_limited")
            #expect(Int(limited.header("Retry-After") ?? "") ?? 0 >= 1)
            sso.time.advance(.seconds(30))
            #expect(try sso.post(form, path: "/psso/nonce").status == 200, "the bucket refills on the gateway's clock")
            let metrics = try sso.gateway.admin("GET", "/metrics").text
            #expect(metrics.contains("attestgate_rate_limited_total{tenant=\"\(sso.appID)\",bucket=\"ip-psso-nonce\"} 1"))
            #expect(metrics.contains("attestgate_psso_nonces_issued_total{tenant=\"\(sso.appID)\"} 3"))
        }
    }

    /// The nonces a tenant holds in Redis are bounded by its `challenge` bucket, however many
    /// client addresses ask (each address has its own `psso_nonce` bucket; an independent
    /// sweep filled Redis from 500 addresses, 60,000 nonce keys for 10 minutes).
    @Test func theNonceEndpointTakesTheTenantChallengeBucket() async throws {
        try await RedisServer.withPrivate { redis in
            let url = "redis://127.0.0.1:\(redis.port)/0"
            let sso = try PlatformSSOGateway(tier: "tiny", gatewayYAML: """
                tiers:
                  tiny: { attest: 100, challenge: 2, api: 100, mad_limit: unlimited }
                ip_limits:
                  psso_nonce: 1000
                """, redisURL: url)
            defer { sso.stop() }
            let form: [UInt8] = Array("grant_type=srv_challenge".utf8)
            #expect(try sso.post(form, path: "/psso/nonce").status == 200)
            #expect(try sso.post(form, path: "/psso/nonce").status == 200)
            let limited = try sso.post(form, path: "/psso/nonce")
            #expect(limited.status == 429)
            #expect(limited.oauthError == "rate_limited")
            #expect(limited.header("X-RateLimit-Limit") == "2", "the tenant bucket refused")
            let stored = try RedisCLI.run(url, "--scan", "--pattern", "ag:{\(sso.appID)}:psso:nonce:*")
            #expect(stored.split(separator: "\n").count == 2, "the refused request stored no nonce: \(stored)")
            let metrics = try sso.gateway.admin("GET", "/metrics").text
            #expect(metrics.contains("attestgate_rate_limited_total{tenant=\"\(sso.appID)\",bucket=\"challenge\"} 1"), "\(metrics)")
        }
    }

    @Test func theTokenEndpointTakesTheTenantAttestBucket() throws {
        let sso = try PlatformSSOGateway(tier: "tiny", gatewayYAML: "tiers:\n  tiny: { attest: 2, challenge: 100, api: 100, mad_limit: unlimited }\n")
        defer { sso.stop() }
        var (mac, token) = try sso.enrolledMac()
        // A malformed request takes no token.
        #expect(try sso.post(Array("grant_type=x".utf8)).status == 400)
        token = try sso.rotate(mac, token: token)
        token = try sso.rotate(mac, token: token)
        let nonce = try sso.nonce()
        let (limited, _) = try sso.refresh(mac, token: token)
        #expect(limited.status == 429)
        #expect(limited.oauthError == "rate_limited")
        #expect(Int(limited.header("Retry-After") ?? "") ?? 0 >= 1)
        #expect(limited.header("X-RateLimit-Remaining") == "0")
        #expect(try sso.nonceState(nonce) != "" && !sso.nonceState(nonce).hasPrefix("used:"), "nothing spent")
        sso.time.advance(.seconds(30))
        mac = try #require(Optional(mac))
        _ = try sso.rotate(mac, token: token)
        let metrics = try sso.gateway.admin("GET", "/metrics").text
        #expect(metrics.contains("attestgate_psso_refreshes_total{tenant=\"\(sso.appID)\",outcome=\"rate_limited\"} 1"))
        #expect(metrics.contains("attestgate_psso_refreshes_total{tenant=\"\(sso.appID)\",outcome=\"ok\"} 3"))
    }

    @Test func everyEndpointFailsClosedWhileRedisIsDown() async throws {
        try await RedisServer.withPrivate { redis in
                let sso = try PlatformSSOGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0")
                defer { sso.stop() }
                let (mac, token) = try sso.enrolledMac()
                let request = sso.request(mac, token: token, nonce: try sso.nonce())
                redis.kill()
                let nonce = try sso.post(Array("grant_type=srv_challenge".utf8), path: "/psso/nonce")
                #expect(nonce.status == 503 && nonce.oauthError == "temporarily_unavailable")
                let refresh = try sso.post(PlatformSSOGateway.form(try request.signed(by: mac)))
                #expect(refresh.status == 503 && refresh.oauthError == "temporarily_unavailable")
                let mint = try sso.gateway.admin("POST", "\(sso.devicesPath)/\(mac.keyID.urlSafe)/refresh-tokens")
                #expect(mint.status == 503 && mint.code == "store_unavailable")
                // An outage is one "state store failed" line per route and interval, not one
                // per request (the sweep counted 100,084 lines for 100,081 nonce requests).
                for _ in 0..<20 {
                    #expect(try sso.post(Array("grant_type=srv_challenge".utf8), path: "/psso/nonce").status == 503)
                }
                let logged = sso.gateway.logText().split(separator: "\n")
                    .filter { $0.contains("\"state store failed\"") && $0.contains("\"route\":\"psso_nonce\"") }
                #expect(logged.count == 1, "\(logged)")
                // Stateless refusals still answer as before.
                let malformed = try sso.post(Array("grant_type=x".utf8))
                #expect(malformed.status == 400 && malformed.oauthError == "unsupported_grant_type")

                try await redis.restart()
                #expect(try eventually(10) { try sso.gateway.send("GET", "/readyz").status == 200 })
                // The throwaway Redis kept nothing: a device enrolled now refreshes again.
                let (fresh, freshToken) = try sso.enrolledMac()
                _ = try sso.rotate(fresh, token: freshToken)
        }
    }
}
