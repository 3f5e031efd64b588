import AGDevTools
import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// `tiers`, `ip_limits`, `rate_limits`, `quotas`.
extension ConfigKeyEffects {
    /// A tier `probe` with the given numbers (the others huge) and generous IP limits.
    static func tier(attest: Int = 100_000, challenge: Int = 100_000, api: Int = 100_000, mad: String = "unlimited") -> String {
        "tiers:\n  probe: { attest: \(attest), challenge: \(challenge), api: \(api), mad_limit: \(mad) }\n"
    }

    static let limits: [KeyEffect] = [
        KeyEffect(key: "gateway:tiers.<name>.attest", observed: "X-RateLimit-Limit of a refresh") {
            let probe = try KeyProbe(gatewayYAML: tier(attest: 7), tier: "probe")
            #expect(try probe.refreshResponse().header("X-RateLimit-Limit") == "7")
        },
        KeyEffect(key: "gateway:tiers.<name>.challenge", observed: "X-RateLimit-Limit of a challenge") {
            let probe = try KeyProbe(gatewayYAML: tier(challenge: 9), tier: "probe")
            #expect(try probe.challenge().header("X-RateLimit-Limit") == "9")
        },
        KeyEffect(key: "gateway:tiers.<name>.api", observed: "X-RateLimit-Limit of a proxied call") {
            let probe = try KeyProbe(gatewayYAML: tier(api: 11), tier: "probe")
            #expect(try probe.proxied("/public/x", token: nil).header("X-RateLimit-Limit") == "11")
        },
        KeyEffect(key: "gateway:tiers.<name>.mad_limit", observed: "the usage endpoint's limit") {
            let probe = try KeyProbe(gatewayYAML: tier(mad: "3"), tier: "probe")
            #expect(try probe.gateway.admin("GET", "/admin/v1/tenants/\(probe.appID)/usage").json["limit"] as? Int == 3)
        },
        // The two IP probes run on their own Redis: every test gateway's requests come from
        // 127.0.0.1, so on the shared Redis a small IP limit would refuse other tests' requests
        // (and a bucket that a test clock ahead of real time stamped would not refill for them).
        KeyEffect(key: "gateway:ip_limits.challenge", observed: "X-RateLimit-Limit of a challenge under a huge tier") {
            try await RedisServer.withPrivate { redis in
                let probe = try KeyProbe(gatewayYAML: "ip_limits:\n  challenge: 4\n  validate: 100000\n",
                                         redisURL: "redis://127.0.0.1:\(redis.port)/0")
                #expect(try probe.challenge().header("X-RateLimit-Limit") == "4")
            }
        },
        KeyEffect(key: "gateway:ip_limits.validate", observed: "the third well-formed validate from one IP is 429") {
            try await RedisServer.withPrivate { redis in
                let probe = try KeyProbe(gatewayYAML: "ip_limits:\n  challenge: 100000\n  validate: 2\n",
                                         redisURL: "redis://127.0.0.1:\(redis.port)/0")
                let ca = try TestCertificateAuthority.generate()
                var statuses: [Int] = []
                for _ in 0..<3 {
                    let device = try SimulatedDevice(teamID: probe.teamID, bundleID: probe.bundleID)
                    let (object, hash) = try device.makeAttestation(challenge: "unknown-challenge", testCA: ca, environment: .development)
                    let body = JSONValue.object([
                        "keyId": .string(device.keyID), "attestationObject": .string(Base64.encode(object)),
                        "clientDataHash": .string(Base64.encode(hash)), "challenge": "unknown-challenge",
                    ]).serialized()
                    let response = try probe.gateway.send("POST", "/api/v1/attestation/validate", headers: probe.headers, body: body)
                    statuses.append(response.status)
                    if statuses.count == 3 { #expect(response.code == "rate_limited") }
                }
                #expect(statuses == [400, 400, 429], "challenge_invalid twice, then the IP bucket")
            }
        },
        KeyEffect(key: "gateway:rate_limits.on_store_error", observed: "deny: a proxied call while Redis is down is 503") {
            try await RedisServer.withPrivate { redis in
                let url = "redis://127.0.0.1:\(redis.port)/0"
                let probe = try KeyProbe(gatewayYAML: "rate_limits:\n  on_store_error: deny\nredis:\n  url: \(url)\n  timeout: 250ms\n",
                                         redisURL: url)
                #expect(try eventually { try probe.gateway.send("GET", "/readyz").status == 200 })
                redis.kill()
                let response = try probe.proxied("/public/x", token: nil)
                #expect(response.status == 503)
                #expect(response.code == "store_unavailable")
            }
        },
        KeyEffect(key: "gateway:quotas.grace", observed: "grace 0s: once the limit was reached, the next new device is 402") {
            let time = ManualTime()
            let probe = try KeyProbe(gatewayYAML: tier(mad: "1") + "quotas:\n  grace: 0s\n", tier: "probe", time: time)
            _ = try probe.token()
            #expect(try probe.refreshResponse().status == 200, "the first device over the limit starts the grace period")
            time.advance(.seconds(1))
            let third = try probe.refreshResponse()
            #expect(third.status == 402)
            #expect(third.code == "quota_exceeded")
        },
        KeyEffect(key: "gateway:quotas.warn_ratio", observed: "the warning line at half the limit") {
            let probe = try KeyProbe(gatewayYAML: tier(mad: "2") + "quotas:\n  warn_ratio: 0.5\n", tier: "probe")
            _ = try probe.token()
            #expect(eventually { !probe.logLines("monthly active devices reached the warning ratio").isEmpty })
        },
    ]
}
