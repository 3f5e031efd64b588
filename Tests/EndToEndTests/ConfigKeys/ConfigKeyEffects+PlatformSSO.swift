import AGDevice
import AGTestSupport
import Foundation
import Testing

extension ConfigKeyEffects {
    /// `platform_sso` and its keys. Most effects need a Mac's whole exchange on a controlled
    /// clock, which the Platform SSO suites already drive with each key set; the check runs
    /// that suite's test, named in `observed`.
    static var platformSSO: [KeyEffect] {
        [
            KeyEffect(key: "tenant:platform_sso", observed: "the tenant's prefix serves POST …/nonce") {
                let sso = try PlatformSSOGateway()
                defer { sso.stop() }
                let nonce = try sso.gateway.send("POST", "/psso/nonce", headers: [], body: Array("grant_type=srv_challenge".utf8))
                #expect(nonce.status == 200, "\(nonce.text)")
            },
            KeyEffect(key: "tenant:platform_sso.path_prefix", observed: "prefix /sso2: /sso2/nonce is served, /psso/nonce is 404") {
                let teamID = TestGateway.randomTeamID()
                let gateway = try TestGateway(tenants: ["p.yaml": TestGateway.tenantYAML(teamID: teamID, extra: """
                    platform_sso:
                      path_prefix: /sso2
                      client_id: c1
                      audience: [https://gw.example/sso2/token]
                    """)], workers: 1)
                defer { gateway.stop() }
                let body = Array("grant_type=srv_challenge".utf8)
                #expect(try gateway.send("POST", "/sso2/nonce", headers: [], body: body).status == 200)
                #expect(try gateway.send("POST", "/psso/nonce", headers: [], body: body).status == 404)
            },
            KeyEffect(key: "tenant:platform_sso.client_id", observed: "PlatformSSOVerificationTableTests: another client_id or iss is 400") {
                try await shared("PlatformSSOVerificationTableTests.everyCheckHasItsStatusAndCode") {
                    try PlatformSSOVerificationTableTests().everyCheckHasItsStatusAndCode()
                }
            },
            KeyEffect(key: "tenant:platform_sso.audience", observed: "PlatformSSOVerificationTableTests: aud must be one of the list") {
                try await shared("PlatformSSOVerificationTableTests.everyCheckHasItsStatusAndCode") {
                    try PlatformSSOVerificationTableTests().everyCheckHasItsStatusAndCode()
                }
            },
            KeyEffect(key: "tenant:platform_sso.issuer", observed: "PlatformSSOSettingsTests: the id_token's iss") {
                try await shared("PlatformSSOSettingsTests.nonceClaimNameIssuerClockSkewAndIdTokenLifetime") {
                    try PlatformSSOSettingsTests().nonceClaimNameIssuerClockSkewAndIdTokenLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.id_token_ttl", observed: "PlatformSSOSettingsTests: expires_in and exp") {
                try await shared("PlatformSSOSettingsTests.nonceClaimNameIssuerClockSkewAndIdTokenLifetime") {
                    try PlatformSSOSettingsTests().nonceClaimNameIssuerClockSkewAndIdTokenLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.nonce_claim_name", observed: "PlatformSSOSettingsTests: the nonce read from that claim") {
                try await shared("PlatformSSOSettingsTests.nonceClaimNameIssuerClockSkewAndIdTokenLifetime") {
                    try PlatformSSOSettingsTests().nonceClaimNameIssuerClockSkewAndIdTokenLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.clock_skew", observed: "PlatformSSOSettingsTests: iat/exp tolerance") {
                try await shared("PlatformSSOSettingsTests.nonceClaimNameIssuerClockSkewAndIdTokenLifetime") {
                    try PlatformSSOSettingsTests().nonceClaimNameIssuerClockSkewAndIdTokenLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.refresh_token_ttl", observed: "PlatformSSOFamilyTests: a family ends at its absolute lifetime") {
                try await shared("PlatformSSOFamilyTests.familiesExpireWhenIdleAndAtTheirAbsoluteLifetime") {
                    try PlatformSSOFamilyTests().familiesExpireWhenIdleAndAtTheirAbsoluteLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.refresh_token_idle", observed: "PlatformSSOFamilyTests: a family unused that long ends") {
                try await shared("PlatformSSOFamilyTests.familiesExpireWhenIdleAndAtTheirAbsoluteLifetime") {
                    try PlatformSSOFamilyTests().familiesExpireWhenIdleAndAtTheirAbsoluteLifetime()
                }
            },
            KeyEffect(key: "tenant:platform_sso.reuse_grace", observed: "PlatformSSOFamilyTests: the grace window ends after reuse_grace") {
                try PlatformSSOFamilyTests().theGraceWindowEndsAfterReuseGrace()
            },
            KeyEffect(key: "tenant:platform_sso.nonce_ttl", observed: "PlatformSSOFamilyTests: a nonce expires after nonce_ttl") {
                try PlatformSSOFamilyTests().serverNoncesExpireAndServeOnce()
            },
            KeyEffect(key: "gateway:ip_limits.psso_nonce", observed: "PlatformSSOLimitsTests: psso_nonce 2, the third nonce from one IP is 429") {
                try await PlatformSSOLimitsTests().theNonceEndpointHasAPerIPBucket()
            },
        ]
    }

    /// Keys added with the HTTP hardening and the Redis deployments.
    static var hardening: [KeyEffect] {
        [
            KeyEffect(key: "gateway:server.timeouts.header", observed: "a head dribbled a byte every 100ms is 408 after 400ms") {
                let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { header: 400ms }\n"))
                let socket = try RawTestSocket(port: probe.gateway.port)
                socket.send("GET /healthz HTTP/1.1\r\nHost: a\r\n")
                for _ in 0..<20 {
                    guard case .sent = socket.sendNow(Array("X".utf8)) else { break }
                    usleep(100_000)
                }
                let (answer, closed) = socket.readUntilClose(timeout: .seconds(3))
                #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
                #expect(closed)
            },
            KeyEffect(key: "gateway:server.timeouts.body_min_rate", observed: "1000 B/s cuts a 100 B/s upload; 0 turns the check off") {
                let (checked, unchecked) = (try dribbledUploadIsCut(minRate: 1000, window: "300ms"),
                                            try dribbledUploadIsCut(minRate: 0, window: "300ms"))
                #expect(checked && !unchecked)
            },
            KeyEffect(key: "gateway:server.timeouts.body_rate_window", observed: "a 300ms window cuts a 100 B/s upload; a 10s one not yet") {
                let (short, long) = (try dribbledUploadIsCut(minRate: 1000, window: "300ms"),
                                     try dribbledUploadIsCut(minRate: 1000, window: "10s"))
                #expect(short && !long)
            },
            KeyEffect(key: "gateway:proxy.unverified_token_policy", observed: "allow: a token is proxied while Redis is down (deny, the default: 503)") {
                try await RedisServer.withPrivate { redis in
                    let url = "redis://127.0.0.1:\(redis.port)/0"
                    let probe = try KeyProbe(gatewayYAML: "proxy:\n  unverified_token_policy: allow\nrate_limits:\n  on_store_error: allow\nredis:\n  url: \(url)\n  timeout: 250ms\n",
                                             redisURL: url)
                    let token = try probe.token().jws
                    redis.kill()
                    #expect(try probe.proxied("/api/x", token: token).status == 200)
                }
            },
            KeyEffect(key: "gateway:redis.wait_replicas", observed: "1 on a Redis without replicas: a refresh is 503 store_unavailable") {
                try expectUnreplicatedCommitRefused(waitTimeout: "50ms")
            },
            KeyEffect(key: "gateway:redis.wait_timeout", observed: "the refused commit waited at least wait_timeout (400ms)") {
                let waited = try seconds { try expectUnreplicatedCommitRefused(waitTimeout: "400ms") }
                #expect(waited >= 0.4)
            },
        ]
    }

    /// A 100,000-byte upload sent at 100 B/s: whether the gateway closes the connection within 1.5 s.
    static func dribbledUploadIsCut(minRate: Int, window: String) throws -> Bool {
        let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { body_min_rate: \(minRate), body_rate_window: \(window) }\n"))
        let socket = try RawTestSocket(port: probe.gateway.port)
        socket.send("POST /public/x HTTP/1.1\r\nHost: a\r\nX-Team-ID: \(probe.teamID)\r\nX-Bundle-ID: \(probe.bundleID)\r\nContent-Length: 100000\r\n\r\n")
        for _ in 0..<15 {
            guard case .sent = socket.sendNow(Array(repeating: UInt8(ascii: "x"), count: 10)) else { return true }
            usleep(100_000)
        }
        return false
    }

    /// `redis.wait_replicas: 1` against the shared test Redis, which has no replica.
    static func expectUnreplicatedCommitRefused(waitTimeout: String) throws {
        let url = TestGateway.sharedRedisURL
        let probe = try KeyProbe(gatewayYAML: "redis:\n  url: \(url)\n  timeout: 2s\n  wait_replicas: 1\n  wait_timeout: \(waitTimeout)\n")
        let session = try probe.device()
        try session.register()
        do {
            _ = try session.refresh()
            Issue.record("a refresh was committed without the replica it must wait for")
        } catch {
            #expect(error.status == 503)
            #expect(error.code == "store_unavailable")
        }
    }
}
