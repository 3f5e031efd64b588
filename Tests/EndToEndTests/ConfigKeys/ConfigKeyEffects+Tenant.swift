import AGDevTools
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// The keys of a tenant file.
extension ConfigKeyEffects {
    static let tenant: [KeyEffect] = [
        KeyEffect(key: "tenant:team_id", observed: "requests with the team id resolve the tenant, another is 401") {
            let probe = try KeyProbe()
            #expect(try probe.challenge().status == 200)
            let other = try probe.gateway.send("GET", "/api/v1/attestation/challenge",
                                               headers: [("X-Team-ID", "ZZZZZ99999"), ("X-Bundle-ID", probe.bundleID)])
            #expect(other.status == 401)
            #expect(other.code == "unknown_tenant")
        },
        KeyEffect(key: "tenant:bundle_id", observed: "requests with the bundle id resolve the tenant, another is 401") {
            let probe = try KeyProbe()
            let other = try probe.gateway.send("GET", "/api/v1/attestation/challenge",
                                               headers: [("X-Team-ID", probe.teamID), ("X-Bundle-ID", "com.example.other")])
            #expect(other.status == 401)
            #expect(other.code == "unknown_tenant")
        },
        KeyEffect(key: "tenant:tier", observed: "the tier's numbers in X-RateLimit-Limit") {
            let probe = try KeyProbe(gatewayYAML: tier(challenge: 13), tier: "probe")
            #expect(try probe.challenge().header("X-RateLimit-Limit") == "13")
        },
        KeyEffect(key: "tenant:environment", observed: "production refuses a development attestation") {
            let ca = try TestCertificateAuthority.generate()
            let section = "app_attest:\n  root_ca: probe-ca.pem\n"
            let production = try KeyProbe(gatewayYAML: section, environment: "production", files: try caFiles(ca))
            let refused = try attest(production, ca: ca, environment: .development)
            #expect(refused.status == 401)
            #expect(refused.code == "apple_validation_failed")
            let development = try KeyProbe(gatewayYAML: section, environment: "development", files: try caFiles(ca))
            #expect(try attest(development, ca: ca, environment: .development).status == 200)
        },
        KeyEffect(key: "tenant:token.audience", observed: "the aud claim") {
            let probe = try KeyProbe(tenantExtra: "token: { audience: probe-audience }")
            #expect(try probe.token().claims["aud"]?.stringValue == "probe-audience")
        },
        KeyEffect(key: "tenant:token.ttl", observed: "exp - iat") {
            let probe = try KeyProbe(tenantExtra: "token: { ttl: 3m }")
            let claims = try probe.token().claims
            #expect((claims["exp"]?.integerValue ?? 0) - (claims["iat"]?.integerValue ?? 0) == 180)
        },
        KeyEffect(key: "tenant:token.header", observed: "the token is read from X-App-Token, not Authorization") {
            let probe = try KeyProbe(tenantExtra: "token: { header: X-App-Token }")
            let token = try probe.token().jws
            #expect(try probe.proxied("/api/x", token: token, header: "X-App-Token").status == 200)
            let missing = try probe.proxied("/api/x", token: token)
            #expect(missing.status == 401)
            #expect(missing.code == "token_missing")
        },
        KeyEffect(key: "tenant:custom_claims", observed: "custom_claims in the token") {
            let probe = try KeyProbe(tenantExtra: "custom_claims: { plan: probe-plan }")
            #expect(try probe.token().claims["custom_claims"]?["plan"]?.stringValue == "probe-plan")
        },
        KeyEffect(key: "tenant:upstream",
                  observed: "the upstream receives the call under its base path; host names and https:// (the upstream suites)") {
            let probe = try KeyProbe()
            #expect(try probe.proxied("/public/hello", token: nil).status == 200)
            #expect(probe.upstream.records.last?.target == "/base/public/hello")
            try await shared("UpstreamHostNameEndToEndTests.aHostNameIsResolvedByTheConfiguredNameServerAndProxied") {
                try await UpstreamHostNameEndToEndTests().aHostNameIsResolvedByTheConfiguredNameServerAndProxied()
            }
            try await shared("UpstreamTLSEndToEndTests.anHTTPSUpstreamIsVerifiedAgainstUpstreamCAAndItsConnectionsPooled") {
                try await UpstreamTLSEndToEndTests().anHTTPSUpstreamIsVerifiedAgainstUpstreamCAAndItsConnectionsPooled()
            }
        },
        KeyEffect(key: "tenant:routes[].prefix", observed: "a path under a prefix is proxied, another is 404") {
            let probe = try KeyProbe()
            #expect(try probe.proxied("/public/x", token: nil).status == 200)
            let outside = try probe.proxied("/elsewhere/x", token: nil)
            #expect(outside.status == 404)
            #expect(outside.code == "not_found")
        },
        KeyEffect(key: "tenant:routes[].auth", observed: "none passes without a token, required answers 401") {
            let probe = try KeyProbe()
            #expect(try probe.proxied("/public/x", token: nil).status == 200)
            let required = try probe.proxied("/api/x", token: nil)
            #expect(required.status == 401)
            #expect(required.code == "token_missing")
        },
        KeyEffect(key: "tenant:forward.claims", observed: "the upstream receives the mapped header") {
            let probe = try KeyProbe(tenantExtra: "forward: { claims: { sub: X-Probe-Device } }")
            let (token, _, claims) = try probe.token()
            #expect(try probe.proxied("/api/x", token: token).status == 200)
            #expect(probe.upstream.records.last?.header("X-Probe-Device") == claims["sub"]?.stringValue)
        },
        KeyEffect(key: "tenant:forward.payload_header", observed: "the upstream receives the payload in X-Probe-Claims") {
            let probe = try KeyProbe(tenantExtra: "forward: { payload_header: X-Probe-Claims }")
            let token = try probe.token().jws
            #expect(try probe.proxied("/api/x", token: token).status == 200)
            let payload = String(token.split(separator: ".")[1])
            #expect(probe.upstream.records.last?.header("X-Probe-Claims") == payload)
            #expect(probe.upstream.records.last?.header("X-Attest-Claims") == nil)
        },
        KeyEffect(key: "tenant:forward.forward_authorization", observed: "true: the upstream receives Authorization") {
            let probe = try KeyProbe(tenantExtra: "forward: { forward_authorization: true }")
            let token = try probe.token().jws
            #expect(try probe.proxied("/api/x", token: token).status == 200)
            #expect(probe.upstream.records.last?.header("Authorization") == "Bearer \(token)")
            let plain = try KeyProbe()
            let other = try plain.token().jws
            #expect(try plain.proxied("/api/x", token: other).status == 200)
            #expect(plain.upstream.records.last?.header("Authorization") == nil)
        },
    ]
}
