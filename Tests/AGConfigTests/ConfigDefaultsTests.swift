import AGTestSupport
import AGAppAttest
import AGFormats
import FoundationEssentials
import Testing

@testable import AGConfig

/// What a minimal configuration means, and how explicit values override it.
@Suite struct ConfigDefaultsTests {
    /// One expectation: a name, the loaded value and the expected value, both rendered as text.
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let actual: String
        let expected: String
        var testDescription: String { name }

        /// One type for both sides, so an optional value is compared with an optional expectation.
        init<Value: Equatable>(_ name: String, _ actual: Value, _ expected: Value) {
            self.name = name
            self.actual = String(describing: actual)
            self.expected = String(describing: expected)
        }
    }

    static func loadMinimal(gateway: String = ConfigFixture.minimalGateway,
                            tenant: String = ConfigFixture.minimalTenant) throws -> (ConfigFixture, LoadedConfig) {
        let fixture = try ConfigFixture()
        try fixture.write("conf/gateway.yaml", gateway)
        try fixture.write("conf/tenants/example.yaml", tenant)
        return (fixture, try ConfigLoader.load(path: fixture.gatewayPath))
    }

    static func defaultRows() throws -> [Row] {
        let (fixture, config) = try loadMinimal()
        let g = config.gateway
        let t = try #require(config.tenants.tenant(appID: "ABCDE12345.com.example.app"))
        let conf = fixture.root + "/conf/"
        return [
            Row("server.listen", g.server.listen.description, "0.0.0.0:8080"),
            Row("server.workers", g.server.workers, 0),
            Row("server.workers resolved", g.server.workerCount(cpuCores: 2), 2),
            Row("server.max_connections", g.server.maxConnections, 0),
            Row("server.max_connections resolved under ulimit -n 1024", g.server.connectionLimit(descriptorLimit: 1024), 512),
            Row("server.max_connections resolved, 40 descriptors of its own", g.server.connectionLimit(descriptorLimit: 1024, reserved: 40), 492),
            Row("descriptors a 2-worker gateway keeps with 10 open", ServerConfig.reservedDescriptors(openNow: 10, workers: 2), 50),
            Row("server.max_connections per worker, 2 workers", ServerConfig.connectionsPerWorker(512, workers: 2), 256),
            Row("server.max_body_bytes", g.server.maxBodyBytes, 65_536),
            Row("server.max_proxy_body_bytes", g.server.maxProxyBodyBytes, 104_857_600),
            Row("server.timeouts.read", g.server.timeouts.read, Duration.seconds(30)),
            Row("server.timeouts.header", g.server.timeouts.header, Duration.seconds(10)),
            Row("server.timeouts.body_min_rate", g.server.timeouts.bodyMinRate, 240),
            Row("server.timeouts.body_rate_window", g.server.timeouts.bodyRateWindow, Duration.seconds(5)),
            Row("server.timeouts.write", g.server.timeouts.write, Duration.seconds(30)),
            Row("server.timeouts.idle", g.server.timeouts.idle, Duration.seconds(60)),
            Row("server.timeouts.upstream_connect", g.server.timeouts.upstreamConnect, Duration.seconds(2)),
            Row("server.timeouts.upstream_response", g.server.timeouts.upstreamResponse, Duration.seconds(30)),
            Row("server.timeouts.tls_handshake", g.server.timeouts.tlsHandshake, Duration.seconds(10)),
            Row("server.shutdown_grace", g.server.shutdownGrace, Duration.seconds(10)),
            Row("server.trusted_proxies", g.server.trustedProxies, [CIDRBlock]()),
            Row("server.tls", g.server.tls == nil, true),
            Row("admin.listen", g.admin.listen.description, "127.0.0.1:9901"),
            Row("admin.token_file", g.admin.tokenFile, conf + "../.run/admin-token"),
            Row("admin.token_env", g.admin.tokenEnvironmentVariable, String?.none),
            Row("redis.url", g.redis.url.description, "redis://127.0.0.1:6379/0"),
            Row("redis.timeout", g.redis.timeout, Duration.milliseconds(250)),
            Row("tokens.ttl", g.tokens.ttl, Duration.seconds(3_600)),
            Row("tokens.leeway", g.tokens.leeway, Duration.seconds(30)),
            Row("tokens.keys[0].algorithm", g.tokens.keys[0].algorithm, TokenAlgorithm.es256),
            Row("tokens.keys[0].active (single key)", g.tokens.keys[0].isActive, true),
            Row("challenge.ttl", g.challenge.ttl, Duration.seconds(300)),
            Row("tiers", g.tiers, RateTier.builtIn),
            Row("tiers.enterprise.mad_limit", g.tiers["enterprise"]?.madLimit, DeviceLimit.unlimited),
            Row("ip_limits.challenge", g.ipLimits.challenge, 120),
            Row("ip_limits.validate", g.ipLimits.validate, 30),
            Row("ip_limits.psso_nonce", g.ipLimits.pssoNonce, 120),
            Row("rate_limits.on_store_error", g.rateLimits.onStoreError, StoreErrorPolicy.local),
            Row("proxy.unverified_token_policy", g.proxy.unverifiedTokenPolicy, UnverifiedTokenPolicy.deny),
            Row("proxy.upstream_keepalive", g.proxy.upstreamKeepalive, 256),
            Row("quotas.grace", g.quotas.grace, Duration.seconds(7 * 86_400)),
            Row("quotas.warn_ratio", g.quotas.warnRatio, 0.8),
            Row("app_attest.root_ca", g.appAttest.rootCAFile, conf + "Apple_App_Attestation_Root_CA.pem"),
            Row("app_attest.test_ca", g.appAttest.testCAFile, String?.none),
            Row("app_attest.allow_test_ca", g.appAttest.allowTestCA, false),
            Row("tenants_dir", g.tenantsDirectory, conf + "tenants"),
            Row("log.format", g.log.format, LogFormat.json),
            Row("log.level", g.log.level, LogLevel.info),
            Row("log.access_log", g.log.accessLog, true),
            Row("resolver.nameservers", g.resolver.nameservers, [String]?.none),
            Row("resolver.timeout", g.resolver.timeout, Duration.seconds(1)),
            Row("tenant name", t.name, "example"),
            Row("tenant tier", t.tier, "free"),
            Row("tenant environment", t.environment, AppAttestEnvironment.production),
            Row("tenant token.audience", t.token.audience, "ABCDE12345.com.example.app"),
            Row("tenant token.ttl", t.token.ttl, Duration.seconds(3_600)),
            Row("tenant token.header", t.token.header, "Authorization"),
            Row("tenant custom_claims", t.customClaims, [String: JSONValue]()),
            Row("tenant upstream", t.upstream == nil, true),
            Row("tenant upstream_ca", t.upstreamCA == nil, true),
            Row("tenant routes", t.routes, [RouteConfig]()),
            Row("tenant forward.claims", t.forward.claims, ForwardConfig.defaultClaims),
            Row("tenant forward.payload_header", t.forward.payloadHeader, "X-Attest-Claims"),
            Row("tenant forward.forward_authorization", t.forward.forwardAuthorization, false),
            Row("tenant platform_sso", t.platformSSO == nil, true),
        ]
    }

    @Test func minimalConfigurationDefaults() throws {
        for row in try Self.defaultRows() {
            #expect(row.actual == row.expected, "\(row.name)")
        }
    }

    static let explicitGateway = """
        server:
          listen: "[::]:8443"
          workers: 4
          max_connections: 10001
          max_body_bytes: 1MiB
          max_proxy_body_bytes: 1GiB
          timeouts: { read: 5s, header: 3s, body_min_rate: 1000, body_rate_window: 2s, write: 6s, idle: 2m, upstream_connect: 500ms, upstream_response: 1h, tls_handshake: 4s }
          shutdown_grace: 0s
          trusted_proxies: [10.0.0.0/8, "fd00::/8"]
          tls: { cert: Apple_App_Attestation_Root_CA.pem, key: ../.run/keys/dev-es256-1.pem }
        admin:
          listen: 10.1.2.3:9000
          token_env: ADMIN_TOKEN
        redis:
          url: "redis://:pw@redis.internal:6380/2"
          timeout: 1s
        tokens:
          issuer: https://gw.example.com
          ttl: 15m
          leeway: 0s
          keys:
            - { kid: old, algorithm: RS256, file: ../.run/keys/dev-es256-1.pem }
            - { kid: new, file: ../.run/keys/dev-es256-1.pem, active: true }
        challenge: { ttl: 2m }
        tiers:
          pro: { api: 12000 }
          gold: { attest: 1, challenge: 2, api: 3, mad_limit: 4 }
        ip_limits: { challenge: 10, validate: 5 }
        rate_limits: { on_store_error: deny }
        proxy: { unverified_token_policy: allow, upstream_keepalive: 0 }
        quotas: { grace: 0s, warn_ratio: 1 }
        app_attest: { test_ca: Apple_App_Attestation_Root_CA.pem, allow_test_ca: true }
        tenants_dir: tenants
        log: { format: text, level: debug, access_log: false }
        resolver: { nameservers: [10.0.0.2, "10.0.0.3:5353", "[fd00::2]:53"], timeout: 250ms }

        """

    static let explicitTenant = """
        team_id: "1234567890"
        bundle_id: com.example.App-2
        tier: gold
        environment: production
        token: { audience: my-api, ttl: 10m, header: X-App-Token }
        custom_claims:
          plan: pro
          limits: { seats: 5, ratio: 0.5, trial: false, tags: [a, "1"] }
        upstream: https://[::1]:9000/base/
        upstream_ca: ../Apple_App_Attestation_Root_CA.pem
        routes:
          - { prefix: /v1/, auth: none }
          - prefix: /v2/
        forward:
          claims:
            sub: X-Device
            custom_claims.limits.seats: X-Seats
          payload_header: false
          forward_authorization: true
        platform_sso:
          path_prefix: /psso/
          client_id: psso-client
          audience: [https://idp.example.com/psso/token]
          refresh_token_ttl: 30d

        """

    @Test func explicitValuesOverrideDefaults() throws {
        let (fixture, config) = try Self.loadMinimal(gateway: Self.explicitGateway, tenant: Self.explicitTenant)
        let g = config.gateway
        let conf = fixture.root + "/conf/"
        let t = try #require(config.tenants.tenant(teamID: "1234567890", bundleID: "com.example.App-2"))
        let rows = [
            Row("server.listen", g.server.listen.description, "[::]:8443"),
            Row("server.workers", g.server.workerCount(cpuCores: 2), 4),
            Row("server.max_connections", g.server.connectionLimit(descriptorLimit: 1024), 10001),
            Row("server.max_connections per worker, rounded up", ServerConfig.connectionsPerWorker(10001, workers: 4), 2501),
            Row("server.max_body_bytes", g.server.maxBodyBytes, 1 << 20),
            Row("server.max_proxy_body_bytes", g.server.maxProxyBodyBytes, 1 << 30),
            Row("server.timeouts", g.server.timeouts, ServerTimeouts(
                read: .seconds(5), header: .seconds(3), bodyMinRate: 1000, bodyRateWindow: .seconds(2),
                write: .seconds(6), idle: .seconds(120), upstreamConnect: .milliseconds(500),
                upstreamResponse: .seconds(3_600), tlsHandshake: .seconds(4))),
            Row("server.shutdown_grace", g.server.shutdownGrace, Duration.zero),
            Row("server.trusted_proxies", g.server.trustedProxies.map(\.description), ["10.0.0.0/8", "fd00::/8"]),
            Row("server.tls", g.server.tls.map { [$0.certificateFile, $0.keyFile] },
                [conf + "Apple_App_Attestation_Root_CA.pem", conf + "../.run/keys/dev-es256-1.pem"]),
            Row("server.tls locations", g.server.tls.map { ["\($0.certificateLocation.keyPath):\($0.certificateLocation.line)",
                                                              "\($0.keyLocation.keyPath):\($0.keyLocation.line)"] },
                ["server.tls.cert:10", "server.tls.key:10"]),
            Row("admin.listen", g.admin.listen.description, "10.1.2.3:9000"),
            Row("admin.token_file (env only)", g.admin.tokenFile, String?.none),
            Row("admin.token_env", g.admin.tokenEnvironmentVariable, "ADMIN_TOKEN"),
            Row("redis.url", g.redis.url.description, "redis://:***@redis.internal:6380/2"),
            Row("redis.timeout", g.redis.timeout, Duration.seconds(1)),
            Row("tokens.issuer", g.tokens.issuer, "https://gw.example.com"),
            Row("tokens.ttl", g.tokens.ttl, Duration.seconds(900)),
            Row("tokens.leeway", g.tokens.leeway, Duration.zero),
            Row("tokens.keys", g.tokens.keys.map { "\($0.kid):\($0.algorithm.rawValue):\($0.isActive)" },
                ["old:RS256:false", "new:ES256:true"]),
            Row("tokens active key", g.tokens.keys.first(where: \.isActive)?.kid ?? "", "new"),
            Row("challenge.ttl", g.challenge.ttl, Duration.seconds(120)),
            Row("tiers.pro (partial keeps defaults)", g.tiers["pro"],
                RateTier(name: "pro", attest: 500, challenge: 1_000, api: 12_000, madLimit: .limited(25_000))),
            Row("tiers.gold (new)", g.tiers["gold"],
                RateTier(name: "gold", attest: 1, challenge: 2, api: 3, madLimit: .limited(4))),
            Row("tiers.free (untouched)", g.tiers["free"], RateTier.builtIn["free"]),
            Row("ip_limits", [g.ipLimits.challenge, g.ipLimits.validate], [10, 5]),
            Row("rate_limits.on_store_error", g.rateLimits.onStoreError, StoreErrorPolicy.deny),
            Row("proxy.unverified_token_policy", g.proxy.unverifiedTokenPolicy, UnverifiedTokenPolicy.allow),
            Row("proxy.upstream_keepalive", g.proxy.upstreamKeepalive, 0),
            Row("quotas", g.quotas, QuotaConfig(grace: .zero, warnRatio: 1)),
            Row("app_attest.test_ca", g.appAttest.testCAFile, conf + "Apple_App_Attestation_Root_CA.pem"),
            Row("app_attest.allow_test_ca", g.appAttest.allowTestCA, true),
            Row("log", g.log, LogConfig(format: .text, level: .debug, accessLog: false)),
            Row("tenant appID", t.appID, "1234567890.com.example.App-2"),
            Row("tenant tier", t.tier, "gold"),
            Row("tenant environment", t.environment, AppAttestEnvironment.production),
            Row("tenant token", t.token, TenantTokenConfig(audience: "my-api", ttl: .seconds(600), header: "X-App-Token")),
            Row("tenant custom_claims", JSONValue.object(t.customClaims).serializedString(),
                #"{"limits":{"ratio":0.5,"seats":5,"tags":["a","1"],"trial":false},"plan":"pro"}"#),
            Row("tenant upstream", t.upstream?.description, "https://[::1]:9000/base"),
            Row("tenant upstream_ca", t.upstreamCA.map { "\($0.path) \($0.location.keyPath):\($0.location.line)" },
                conf + "tenants/../Apple_App_Attestation_Root_CA.pem upstream_ca:10"),
            Row("resolver", [g.resolver.nameservers?.joined(separator: " ") ?? "", "\(g.resolver.timeout)"],
                ["10.0.0.2 10.0.0.3:5353 [fd00::2]:53", "\(Duration.milliseconds(250))"]),
            Row("tenant routes", t.routes, [RouteConfig(prefix: "/v1/", auth: .anonymous),
                                            RouteConfig(prefix: "/v2/", auth: .required)]),
            Row("tenant forward.claims", t.forward.claims, [
                ClaimHeader(claimPath: ["sub"], header: "X-Device"),
                ClaimHeader(claimPath: ["custom_claims", "limits", "seats"], header: "X-Seats"),
            ]),
            Row("tenant forward.payload_header", t.forward.payloadHeader, String?.none),
            Row("tenant forward.forward_authorization", t.forward.forwardAuthorization, true),
            Row("tenant platform_sso", t.platformSSO, PlatformSSOConfig(
                pathPrefix: "/psso", pathPrefixLine: 21, clientID: "psso-client", clientIDLine: 22, audiences: ["https://idp.example.com/psso/token"],
                issuer: "https://gw.example.com", idTokenTTL: .seconds(8 * 3_600), refreshTokenTTL: .seconds(30 * 86_400),
                refreshTokenIdle: .seconds(7 * 86_400), reuseGrace: .seconds(30), nonceTTL: .seconds(300),
                nonceClaimName: "request_nonce", clockSkew: .seconds(60))),
        ]
        for row in rows {
            #expect(row.actual == row.expected, "\(row.name)")
        }
    }

    @Test func adminTokenFileMayBeMissingWhenTokenEnvIsSet() throws {
        let fixture = try ConfigFixture()
        try fixture.remove(".run/admin-token")
        try fixture.write("conf/gateway.yaml", ConfigFixture.minimalGateway
            + "admin:\n  token_file: ../.run/admin-token\n  token_env: ATTESTGATE_ADMIN_TOKEN\n")
        let admin = try ConfigLoader.load(path: fixture.gatewayPath).gateway.admin
        #expect(admin.tokenFile == fixture.root + "/conf/../.run/admin-token")
        #expect(admin.tokenEnvironmentVariable == "ATTESTGATE_ADMIN_TOKEN")
    }

    /// With token_env the variable is read when serving, so the file may also be empty.
    @Test func adminTokenFileMayBeEmptyWhenTokenEnvIsSet() throws {
        let fixture = try ConfigFixture()
        try fixture.write(".run/admin-token", "\n")
        try fixture.write("conf/gateway.yaml", ConfigFixture.minimalGateway
            + "admin:\n  token_file: ../.run/admin-token\n  token_env: ATTESTGATE_ADMIN_TOKEN\n")
        #expect(fixture.problems() == [])
    }

    /// A tenant without routes keeps what attestation uses (token audience and lifetime,
    /// custom claims, Platform SSO); proxy keys with no value are no settings at all.
    @Test func tenantWithoutRoutesKeepsItsTokenSettings() throws {
        let (_, config) = try Self.loadMinimal(tenant: ConfigFixture.minimalTenant + """
            token: { audience: my-api, ttl: 10m, header: ~ }
            custom_claims: { plan: pro }
            upstream: ~
            forward: {}
            routes: []
            platform_sso: { path_prefix: /psso, client_id: c1, audience: [https://idp.example.com/psso/token] }

            """)
        let t = try #require(config.tenants.tenant(appID: "ABCDE12345.com.example.app"))
        #expect(t.token == TenantTokenConfig(audience: "my-api", ttl: .seconds(600), header: "Authorization"))
        #expect(t.upstream == nil && t.routes.isEmpty && t.platformSSO != nil)
    }

    /// `forward.payload_header` is the one key where no value is not the default: `~`, an
    /// empty value, `false` and `""` all turn the payload header off (README, tenants/<name>.yaml).
    static let payloadHeaderSettings: [(String, String?)] = [
        ("", "X-Attest-Claims"), ("payload_header: X-Claims", "X-Claims"), ("payload_header: false", nil),
        ("payload_header: ~", nil), ("payload_header: null", nil), ("payload_header:", nil), (#"payload_header: """#, nil),
    ]

    @Test(arguments: payloadHeaderSettings)
    func payloadHeader(_ setting: String, _ expected: String?) throws {
        let (_, config) = try Self.loadMinimal(tenant: ConfigFixture.minimalTenant
            + "upstream: http://127.0.0.1:9000\nroutes: [{ prefix: /api/ }]\nforward:\n  \(setting)\n")
        let t = try #require(config.tenants.tenant(appID: "ABCDE12345.com.example.app"))
        #expect(t.forward.payloadHeader == expected)
    }

    @Test func checkAcceptsTheConfigurationDirectory() throws {
        let fixture = try ConfigFixture()
        #expect(ConfigLoader.check(path: fixture.root + "/conf") == [])
        #expect(ConfigLoader.check(path: fixture.root + "/conf/") == [])
    }
}
