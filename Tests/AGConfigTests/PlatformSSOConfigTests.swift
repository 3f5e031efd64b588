import AGTestSupport
import FoundationEssentials
import Testing

@testable import AGConfig

/// `platform_sso:` (DESIGN section 11): defaults, every key, and every refusal with its line.
@Suite struct PlatformSSOConfigTests {
    static func tenant(_ lines: String, team: String = "ABCDE12345", extra: String = "") -> String {
        "team_id: \(team)\nbundle_id: com.example.app\nenvironment: development\n\(extra)platform_sso:\n" + lines
    }

    static let minimal = "  path_prefix: /psso\n  client_id: c1\n  audience: [https://gw.example.com/psso/token]\n"

    func load(_ files: [String: String]) throws -> (ConfigFixture, [String]) {
        let fixture = try ConfigFixture()
        try fixture.write("conf/gateway.yaml", ConfigFixture.minimalGateway)
        try fixture.remove("conf/tenants/example.yaml")
        for (name, body) in files { try fixture.write("conf/tenants/\(name)", body) }
        return (fixture, fixture.problems())
    }

    @Test func defaults() throws {
        let (fixture, problems) = try load(["a.yaml": Self.tenant(Self.minimal)])
        #expect(problems == [])
        let config = try ConfigLoader.load(path: fixture.gatewayPath)
        let sso = try #require(config.tenants.tenant(appID: "ABCDE12345.com.example.app")?.platformSSO)
        #expect(sso == PlatformSSOConfig(
            pathPrefix: "/psso", pathPrefixLine: 5, clientID: "c1", clientIDLine: 6, audiences: ["https://gw.example.com/psso/token"],
            issuer: "test-issuer", idTokenTTL: .seconds(8 * 3_600), refreshTokenTTL: .seconds(14 * 86_400),
            refreshTokenIdle: .seconds(7 * 86_400), reuseGrace: .seconds(30), nonceTTL: .seconds(300),
            nonceClaimName: "request_nonce", clockSkew: .seconds(60)))
    }

    @Test func everyKey() throws {
        let (fixture, problems) = try load(["a.yaml": Self.tenant("""
              path_prefix: /sso/mac/
              client_id: c1
              audience:
                - https://gw.example.com/sso/mac/token
                - http://127.0.0.1:8080/sso/mac/refresh?x=1
              issuer: https://idp.example.com
              id_token_ttl: 4h
              refresh_token_ttl: 2d
              refresh_token_idle: 1d
              reuse_grace: 0s
              nonce_ttl: 1m
              nonce_claim_name: srv_nonce
              clock_skew: 0s

            """)])
        #expect(problems == [])
        let config = try ConfigLoader.load(path: fixture.gatewayPath)
        let sso = try #require(config.tenants.tenant(appID: "ABCDE12345.com.example.app")?.platformSSO)
        #expect(sso == PlatformSSOConfig(
            pathPrefix: "/sso/mac", pathPrefixLine: 5, clientID: "c1", clientIDLine: 6,
            audiences: ["https://gw.example.com/sso/mac/token", "http://127.0.0.1:8080/sso/mac/refresh?x=1"],
            issuer: "https://idp.example.com", idTokenTTL: .seconds(4 * 3_600), refreshTokenTTL: .seconds(2 * 86_400),
            refreshTokenIdle: .seconds(86_400), reuseGrace: .zero, nonceTTL: .seconds(60), nonceClaimName: "srv_nonce",
            clockSkew: .zero))
    }

    @Test func aShortFamilyLifetimeBoundsTheDefaultIdleTime() throws {
        let (fixture, problems) = try load(["a.yaml": Self.tenant(Self.minimal + "  refresh_token_ttl: 1d\n")])
        #expect(problems == [])
        let config = try ConfigLoader.load(path: fixture.gatewayPath)
        #expect(config.tenants.tenant(appID: "ABCDE12345.com.example.app")?.platformSSO?.refreshTokenIdle == .seconds(86_400))
    }

    struct BadCase: Sendable, CustomTestStringConvertible {
        let name: String
        let files: [String: String]
        let expected: [String]
        var testDescription: String { name }
    }

    static let a = "conf/tenants/a.yaml"
    static let badCases: [BadCase] = [
        BadCase(name: "required keys", files: ["a.yaml": tenant("  issuer: x\n")], expected: [
            "\(a):4: platform_sso.path_prefix: missing required key",
            "\(a):4: platform_sso.client_id: missing required key",
            "\(a):4: platform_sso.audience: missing required key",
        ]),
        BadCase(name: "unknown key", files: ["a.yaml": tenant(minimal + "  reuse_window: 1s\n")], expected: [
            "\(a):8: platform_sso.reuse_window: unknown key; allowed keys: path_prefix, client_id, audience, issuer, id_token_ttl, refresh_token_ttl, refresh_token_idle, reuse_grace, nonce_ttl, nonce_claim_name, clock_skew",
        ]),
        BadCase(name: "prefix /", files: ["a.yaml": tenant("  path_prefix: /\n  client_id: c\n  audience: [https://x]\n")], expected: [
            "\(a):5: platform_sso.path_prefix: expected a path below /, e.g. /psso",
        ]),
        BadCase(name: "prefix above a gateway path", files: ["a.yaml": tenant("  path_prefix: /api/v1\n  client_id: c\n  audience: [https://x]\n")],
                expected: [#"\#(a):5: platform_sso.path_prefix: "/api/v1" contains /api/v1/attestation, which the gateway serves itself"#]),
        BadCase(name: "prefix under a gateway path", files: ["a.yaml": tenant("  path_prefix: /healthz/p\n  client_id: c\n  audience: [https://x]\n")],
                expected: [#"\#(a):5: platform_sso.path_prefix: "/healthz/p" is under /healthz, which the gateway serves itself"#]),
        BadCase(name: "prefix under the tenant's own route",
                files: ["a.yaml": tenant(minimal, extra: "upstream: http://127.0.0.1:9\nroutes:\n  - prefix: /\n")],
                expected: [#"\#(a):8: platform_sso.path_prefix: "/psso" overlaps the route prefix "/""#]),
        BadCase(name: "a route under the prefix",
                files: ["a.yaml": tenant(minimal, extra: "upstream: http://127.0.0.1:9\nroutes:\n  - prefix: /psso/x\n")],
                expected: [#"\#(a):8: platform_sso.path_prefix: "/psso" overlaps the route prefix "/psso/x""#]),
        BadCase(name: "the same prefix in two tenants",
                files: ["a.yaml": tenant(minimal), "b.yaml": tenant(minimal, team: "ZZZZZ12345")],
                expected: [#"conf/tenants/b.yaml:5: platform_sso.path_prefix: "/psso" overlaps the path_prefix "/psso" of conf/tenants/a.yaml:5"#]),
        BadCase(name: "nested prefixes in two tenants",
                files: ["a.yaml": tenant(minimal), "b.yaml": tenant(minimal.replacingOccurrences(of: "/psso\n", with: "/psso/b\n"), team: "ZZZZZ12345")],
                expected: [#"conf/tenants/b.yaml:5: platform_sso.path_prefix: "/psso/b" overlaps the path_prefix "/psso" of conf/tenants/a.yaml:5"#]),
        BadCase(name: "another tenant's route",
                files: ["a.yaml": tenant(minimal),
                        "b.yaml": "team_id: ZZZZZ12345\nbundle_id: com.example.app\nenvironment: development\nupstream: http://127.0.0.1:9\nroutes:\n  - prefix: /psso/\n"],
                expected: [#"conf/tenants/a.yaml:5: platform_sso.path_prefix: "/psso" overlaps the route prefix "/psso/" of conf/tenants/b.yaml"#]),
        BadCase(name: "client_id the tenant's own token audience (by default its App ID)",
                files: ["a.yaml": tenant(minimal.replacingOccurrences(of: "client_id: c1", with: "client_id: ABCDE12345.com.example.app"))],
                expected: [#"\#(a):6: platform_sso.client_id: "ABCDE12345.com.example.app" is this tenant's token.audience: id_tokens would pass as access tokens on proxied routes; choose another client_id or token.audience"#]),
        BadCase(name: "client_id another tenant's token audience",
                files: ["a.yaml": tenant(minimal),
                        "b.yaml": "team_id: ZZZZZ12345\nbundle_id: com.example.app\nenvironment: development\ntoken:\n  audience: c1\n"],
                expected: [#"\#(a):6: platform_sso.client_id: "c1" is the token.audience of conf/tenants/b.yaml: id_tokens would pass as access tokens on proxied routes; choose another client_id or token.audience"#]),
        BadCase(name: "audience a single string", files: ["a.yaml": tenant("  path_prefix: /psso\n  client_id: c\n  audience: https://x\n")],
                expected: [#"\#(a):7: platform_sso.audience: expected a list of absolute URLs (the token and refresh URLs the Macs are configured with), got "https://x""#]),
        BadCase(name: "audience empty", files: ["a.yaml": tenant("  path_prefix: /psso\n  client_id: c\n  audience: []\n")],
                expected: ["\(a):7: platform_sso.audience: expected at least one absolute URL"]),
        BadCase(name: "audience not absolute, duplicate",
                files: ["a.yaml": tenant("  path_prefix: /psso\n  client_id: c\n  audience: [/psso/token, \"ftp://x\", \"https://\", https://a@b, https://x, https://x]\n")],
                expected: [
                    #"\#(a):7: platform_sso.audience[0]: expected an absolute URL like https://gateway.example.com/psso/token, got "/psso/token""#,
                    #"\#(a):7: platform_sso.audience[1]: expected an absolute URL like https://gateway.example.com/psso/token, got "ftp://x""#,
                    #"\#(a):7: platform_sso.audience[2]: expected an absolute URL like https://gateway.example.com/psso/token, got "https://""#,
                    #"\#(a):7: platform_sso.audience[3]: expected an absolute URL like https://gateway.example.com/psso/token, got "https://a@b""#,
                    #"\#(a):7: platform_sso.audience[5]: duplicate audience "https://x""#,
                ]),
        BadCase(name: "lifetimes", files: ["a.yaml": tenant(minimal + """
              id_token_ttl: 10m
              refresh_token_ttl: 1d
              refresh_token_idle: 2d
              reuse_grace: 11m
              nonce_ttl: 2h
              clock_skew: 1500ms

            """)], expected: [
            "\(a):8: platform_sso.id_token_ttl: must be longer than 10m: a Mac refreshes whenever its id_token expires within 10 minutes",
            "\(a):10: platform_sso.refresh_token_idle: must not exceed refresh_token_ttl: it would never apply",
            "\(a):11: platform_sso.reuse_grace: must be at most 10m",
            "\(a):12: platform_sso.nonce_ttl: must be at most 1h",
            "\(a):13: platform_sso.clock_skew: must be whole seconds",
        ]),
        BadCase(name: "zero where zero means nothing", files: ["a.yaml": tenant(minimal + "  nonce_ttl: 0s\n  refresh_token_ttl: 0s\n")],
                expected: ["\(a):8: platform_sso.nonce_ttl: must be greater than zero",
                           "\(a):9: platform_sso.refresh_token_ttl: must be greater than zero"]),
        BadCase(name: "nonce claim named like another claim", files: ["a.yaml": tenant(minimal + "  nonce_claim_name: nonce\n")],
                expected: ["\(a):8: platform_sso.nonce_claim_name: nonce is another claim of the refresh request"]),
    ]

    @Test(arguments: badCases)
    func badConfigurationIsRejected(_ badCase: BadCase) throws {
        let (_, problems) = try load(badCase.files)
        #expect(problems == badCase.expected)
    }
}
