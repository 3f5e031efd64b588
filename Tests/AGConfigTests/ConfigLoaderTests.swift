import AGTestSupport
import AGFormats
import FoundationEssentials
import Glibc
import Testing

@testable import AGConfig

@Suite struct ConfigLoaderTests {
    @Test func shippedConfigurationLoads() throws {
        let fixture = try ConfigFixture()
        #expect(fixture.problems() == [])
        let config = try ConfigLoader.load(path: fixture.root + "/conf")
        let gateway = config.gateway
        #expect(gateway.tokens.issuer == "https://attestgate.example.com")
        #expect(gateway.tokens.keys.first(where: \.isActive)?.kid == "dev-es256-1")
        #expect(gateway.tokens.keys.first(where: \.isActive)?.file == fixture.root + "/conf/../.run/keys/dev-es256-1.pem")
        #expect(gateway.appAttest.rootCAFile == fixture.root + "/conf/Apple_App_Attestation_Root_CA.pem")
        #expect(gateway.admin.tokenFile == fixture.root + "/conf/../.run/admin-token")
        #expect(config.tenants.all.count == 1)
        let tenant = try #require(config.tenants.tenant(teamID: "ABCDE12345", bundleID: "com.example.app"))
        #expect(tenant.appID == "ABCDE12345.com.example.app")
        #expect(tenant.name == "example")
        #expect(tenant.tier == "free")
        #expect(tenant.environment == .development)
        #expect(tenant.upstream?.description == "http://127.0.0.1:9000")
        #expect(tenant.routes == [RouteConfig(prefix: "/api/", auth: .required),
                                  RouteConfig(prefix: "/public/", auth: .anonymous)])
        #expect(JSONValue.object(tenant.customClaims).serializedString() == #"{"features":["sync","export"],"plan":"beta"}"#)
    }

    @Test func shippedConfigurationNeedsTheDevelopmentKey() throws {
        let fixture = try ConfigFixture()
        try fixture.remove(".run/keys/dev-es256-1.pem")
        #expect(fixture.problems() == [
            #"conf/gateway.yaml:88: tokens.keys[0].file: key file "conf/../.run/keys/dev-es256-1.pem" does not exist"#,
        ])
    }

    /// A broken configuration and every line `check` must print for it.
    struct BadCase: Sendable, CustomTestStringConvertible {
        let name: String
        /// Files to write, relative to the fixture root; `nil` content removes the file.
        let files: [(String, String?)]
        var directories: [String] = []
        var checkPath: String? = nil
        let expected: [String]

        var testDescription: String { name }
    }

    static func gatewayWith(_ extra: String) -> String { ConfigFixture.minimalGateway + extra }

    /// A route and its upstream, for the end of a tenant file whose proxy keys are under test.
    static let routesLast = "upstream: http://127.0.0.1:9000\nroutes: [{ prefix: /api/ }]\n"

    static let badCases: [BadCase] = [
        BadCase(name: "unknown key", files: [("conf/gateway.yaml", gatewayWith("server:\n  listn: 0.0.0.0:80\n"))], expected: [
            "conf/gateway.yaml:7: server.listn: unknown key (did you mean listen?); allowed keys: listen, workers, max_connections, max_body_bytes, max_proxy_body_bytes, timeouts, shutdown_grace, trusted_proxies, tls",
        ]),
        BadCase(name: "unknown top-level key", files: [("conf/gateway.yaml", gatewayWith("loggin: {}\n"))], expected: [
            "conf/gateway.yaml:6: loggin: unknown key; allowed keys: server, admin, redis, tokens, challenge, tiers, ip_limits, rate_limits, proxy, quotas, app_attest, tenants_dir, log, resolver",
        ]),
        BadCase(name: "wrong types", files: [("conf/gateway.yaml", gatewayWith("""
            server:
              workers: many
              timeouts: 30s
            log:
              access_log: "yes"
            ip_limits: [1, 2]

            """))], expected: [
            #"conf/gateway.yaml:7: server.workers: expected an integer, got "many""#,
            #"conf/gateway.yaml:8: server.timeouts: expected a mapping, got "30s""#,
            #"conf/gateway.yaml:10: log.access_log: expected true or false, got "yes""#,
            "conf/gateway.yaml:11: ip_limits: expected a mapping, got a list",
        ]),
        BadCase(name: "out of range", files: [("conf/gateway.yaml", gatewayWith("server:\n  workers: -1\n  max_connections: -5\nip_limits:\n  validate: 0\nquotas:\n  warn_ratio: 1.5\n"))], expected: [
            "conf/gateway.yaml:7: server.workers: expected an integer from 0 to 1024, got -1",
            "conf/gateway.yaml:8: server.max_connections: expected an integer from 0 to 10000000, got -5",
            "conf/gateway.yaml:10: ip_limits.validate: expected an integer from 1 to 100000000, got 0",
            "conf/gateway.yaml:12: quotas.warn_ratio: expected a number from 0.01 to 1, got 1.5",
        ]),
        BadCase(name: "bad client timeouts", files: [("conf/gateway.yaml", gatewayWith("""
            server:
              timeouts:
                header: 0s
                body_min_rate: -5
                body_rate_window: soon

            """))], expected: [
            "conf/gateway.yaml:8: server.timeouts.header: must be greater than zero",
            "conf/gateway.yaml:9: server.timeouts.body_min_rate: expected an integer from 0 to 1073741824, got -5",
            #"conf/gateway.yaml:10: server.timeouts.body_rate_window: expected a duration like 250ms, 30s, 5m, 1h or 7d, got "soon""#,
        ]),
        // Accepted only where it has an effect (stop 32; it was accepted and ignored).
        BadCase(name: "a TLS handshake deadline without TLS", files: [("conf/gateway.yaml", gatewayWith("""
            server:
              timeouts: { tls_handshake: 3s }

            """))], expected: [
            "conf/gateway.yaml:7: server.timeouts.tls_handshake: applies only with server.tls: the public listener serves plain HTTP",
        ]),
        BadCase(name: "bad durations", files: [("conf/gateway.yaml", gatewayWith("""
            redis:
              timeout: 250
            challenge:
              ttl: 5 minutes
            server:
              timeouts:
                idle: 0s
                read: 1.5s

            """))], expected: [
            "conf/gateway.yaml:7: redis.timeout: expected a duration like 250ms, 30s, 5m, 1h or 7d, got 250 (add a unit)",
            #"conf/gateway.yaml:9: challenge.ttl: expected a duration like 250ms, 30s, 5m, 1h or 7d, got "5 minutes""#,
            "conf/gateway.yaml:12: server.timeouts.idle: must be greater than zero",
            #"conf/gateway.yaml:13: server.timeouts.read: expected a duration like 250ms, 30s, 5m, 1h or 7d, got "1.5s""#,
        ]),
        BadCase(name: "limits beyond what a bucket keeps exactly, refused as the admin API refuses them",
                files: [("conf/gateway.yaml", gatewayWith("tiers:\n  big: { attest: 100000000, challenge: 1, api: 500000000, mad_limit: 1 }\nip_limits:\n  challenge: 100000001\n"))],
                expected: [
            "conf/gateway.yaml:7: tiers.big.api: expected an integer from 1 to 100000000, got 500000000",
            "conf/gateway.yaml:9: ip_limits.challenge: expected an integer from 1 to 100000000, got 100000001",
        ]),
        BadCase(name: "durations beyond ten years (run-time arithmetic on them could overflow)", files: [
            ("conf/gateway.yaml", gatewayWith("challenge:\n  ttl: 100000000000000m\n")),
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "token:\n  ttl: 3651d\nplatform_sso:\n  path_prefix: /psso\n  client_id: c\n  audience: [https://x.example/psso/token]\n  refresh_token_ttl: 100000000000000s\n"),
        ], expected: [
            "conf/gateway.yaml:7: challenge.ttl: must be at most 3650d (ten years)",
            "conf/tenants/example.yaml:4: token.ttl: must be at most 3650d (ten years)",
            "conf/tenants/example.yaml:9: platform_sso.refresh_token_ttl: must be at most 3650d (ten years)",
        ]),
        BadCase(name: "route prefixes no request path can match (requests are matched normalized)",
                files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            upstream: http://127.0.0.1:9000
            routes:
              - { prefix: "/a%2Fb/" }
              - { prefix: "/c//d/" }
              - { prefix: "/%65ee/" }
              - { prefix: "/x%3a/" }
              - { prefix: "/y%G1/" }
              - { prefix: "/..;x/" }
              - { prefix: "/caf%C3%A9/" }
              - { prefix: "/v1;x=1/" }

            """)], expected: [
            #"conf/tenants/example.yaml:5: routes[0].prefix: no request can match "/a%2Fb/": a request path holding an encoded /, \ or NUL is refused"#,
            #"conf/tenants/example.yaml:6: routes[1].prefix: no request can match "/c//d/": it has an empty segment (//), and request paths are matched with one / between segments"#,
            #"conf/tenants/example.yaml:7: routes[2].prefix: no request can match "/%65ee/": request paths are matched with unreserved characters unescaped (write e)"#,
            #"conf/tenants/example.yaml:8: routes[3].prefix: no request can match "/x%3a/": request paths are matched with escapes in upper case"#,
            #"conf/tenants/example.yaml:9: routes[4].prefix: no request can match "/y%G1/": % must be followed by two hex digits"#,
            #"conf/tenants/example.yaml:10: routes[5].prefix: no request can match "/..;x/": a request path with a . or .. segment before a ; is refused"#,
        ]),
        BadCase(name: "bad sizes", files: [("conf/gateway.yaml", gatewayWith("server:\n  max_body_bytes: 64KB\n  max_proxy_body_bytes: 0\n"))], expected: [
            #"conf/gateway.yaml:7: server.max_body_bytes: expected a size like 1048576, 64KiB, 1MiB or 1GiB, got "64KB" (units are binary: KiB, MiB, GiB)"#,
            "conf/gateway.yaml:8: server.max_proxy_body_bytes: must be greater than zero",
        ]),
        BadCase(name: "bad listen addresses", files: [("conf/gateway.yaml", gatewayWith("server:\n  listen: \"::1:8080\"\nadmin:\n  listen: localhost:99999\n"))], expected: [
            #"conf/gateway.yaml:7: server.listen: expected host:port (IPv6 in brackets, e.g. [::]:8080), got "::1:8080""#,
            #"conf/gateway.yaml:9: admin.listen: expected host:port (IPv6 in brackets, e.g. [::]:8080), got "localhost:99999""#,
        ]),
        BadCase(name: "admin listener on the public listener's address", files: [
            ("conf/gateway.yaml", gatewayWith("server:\n  listen: \"127.0.0.1:8080\"\nadmin:\n  listen: \"127.0.0.1:8080\"\n")),
        ], expected: [
            #"conf/gateway.yaml:9: admin.listen: "127.0.0.1:8080" overlaps server.listen "127.0.0.1:8080" (line 7): both bind 127.0.0.1:8080; give each listener a port of its own"#,
        ]),
        BadCase(name: "admin listener under the public wildcard", files: [
            ("conf/gateway.yaml", gatewayWith("server:\n  listen: \"0.0.0.0:9000\"\nadmin:\n  listen: localhost:9000\n")),
        ], expected: [
            #"conf/gateway.yaml:9: admin.listen: "localhost:9000" overlaps server.listen "0.0.0.0:9000" (line 7): 0.0.0.0 takes port 9000 on every IPv4 address; give each listener a port of its own"#,
        ]),
        BadCase(name: "IPv6 wildcard beside an IPv4 listener", files: [
            ("conf/gateway.yaml", gatewayWith("server:\n  listen: \"[::]:8443\"\nadmin:\n  listen: \"10.0.0.5:8443\"\n")),
        ], expected: [
            #"conf/gateway.yaml:9: admin.listen: "10.0.0.5:8443" overlaps server.listen "[::]:8443" (line 7): [::] takes port 8443 on every address, IPv4 included; give each listener a port of its own"#,
        ]),
        BadCase(name: "public listener on the default admin port", files: [
            ("conf/gateway.yaml", gatewayWith("server:\n  listen: \"0.0.0.0:9901\"\n")),
        ], expected: [
            #"conf/gateway.yaml:7: server.listen: "0.0.0.0:9901" overlaps admin.listen "127.0.0.1:9901" (the default): 0.0.0.0 takes port 9901 on every IPv4 address; give each listener a port of its own"#,
        ]),
        BadCase(name: "admin listener on the default public port", files: [
            ("conf/gateway.yaml", gatewayWith("admin:\n  listen: \"[::]:8080\"\n")),
        ], expected: [
            #"conf/gateway.yaml:7: admin.listen: "[::]:8080" overlaps server.listen "0.0.0.0:8080" (the default): [::] takes port 8080 on every address, IPv4 included; give each listener a port of its own"#,
        ]),
        BadCase(name: "listener at a host name", files: [
            ("conf/gateway.yaml", gatewayWith("admin:\n  listen: gw.example.com:9901\n")),
        ], expected: [
            #"conf/gateway.yaml:7: admin.listen: expected an IP address or localhost as host (a listener binds an address, not a name), got "gw.example.com:9901""#,
        ]),
        BadCase(name: "bad CIDRs", files: [("conf/gateway.yaml", gatewayWith("server:\n  trusted_proxies: [10.0.0.1/8, 300.1.1.1, \"fd00::/129\", 10.0.0.0/8]\n"))], expected: [
            #"conf/gateway.yaml:7: server.trusted_proxies[0]: "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?"#,
            #"conf/gateway.yaml:7: server.trusted_proxies[1]: expected an IPv4 or IPv6 address or CIDR block like 10.0.0.0/8 or fd00::/8, got "300.1.1.1""#,
            #"conf/gateway.yaml:7: server.trusted_proxies[2]: expected an IPv4 or IPv6 address or CIDR block like 10.0.0.0/8 or fd00::/8, got "fd00::/129""#,
        ]),
        BadCase(name: "bad redis URL hides credentials", files: [("conf/gateway.yaml", gatewayWith("redis:\n  url: http://:secret@127.0.0.1:6379\n"))], expected: [
            "conf/gateway.yaml:7: redis.url: unsupported Redis URL scheme (got http://…); expected redis://[[user]:password@]host[:port][/db], unix:///path[?db=N], redis-cluster://[[user]:password@]host:port[,host:port…] or redis-sentinel://[[user]:password@]host:port[,host:port…]/<master-name>[?db=N]",
        ]),
        BadCase(name: "mistyped redis URL never echoes what may be a password",
                files: [("conf/gateway.yaml", gatewayWith("redis:\n  url: redis://user:s3cret/0\n"))], expected: [
            "conf/gateway.yaml:7: redis.url: invalid port in Redis URL (expected 1-65535) (got redis://…); expected redis://[[user]:password@]host[:port][/db], unix:///path[?db=N], redis-cluster://[[user]:password@]host:port[,host:port…] or redis-sentinel://[[user]:password@]host:port[,host:port…]/<master-name>[?db=N]",
        ]),
        BadCase(name: "wait_timeout not below the command timeout",
                files: [("conf/gateway.yaml", gatewayWith("redis:\n  timeout: 200ms\n  wait_replicas: 1\n  wait_timeout: 200ms\n"))], expected: [
            "conf/gateway.yaml:9: redis.wait_timeout: must be shorter than redis.timeout (0.2 seconds), which bounds the whole commit",
        ]),
        BadCase(name: "unknown unverified token policy",
                files: [("conf/gateway.yaml", gatewayWith("proxy:\n  unverified_token_policy: maybe\n"))], expected: [
            "conf/gateway.yaml:7: proxy.unverified_token_policy: expected one of deny, allow, got \"maybe\"",
        ]),
        BadCase(name: "upstream keep-alive not a count", files: [("conf/gateway.yaml", gatewayWith("proxy:\n  upstream_keepalive: -1\n"))],
                expected: ["conf/gateway.yaml:7: proxy.upstream_keepalive: expected an integer from 0 to 65536, got -1"]),
        BadCase(name: "upstream keep-alive with a unit", files: [("conf/gateway.yaml", gatewayWith("proxy:\n  upstream_keepalive: 64 conns\n"))],
                expected: [#"conf/gateway.yaml:7: proxy.upstream_keepalive: expected an integer, got "64 conns""#]),
        BadCase(name: "upstream_ca beside a plain upstream, or missing", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant
            + "upstream: http://api.example.com\nupstream_ca: ../Apple_App_Attestation_Root_CA.pem\nroutes: [{ prefix: /api/ }]\n"),
                                                    ("conf/tenants/other.yaml", "team_id: OTHER12345\nbundle_id: com.example.other\n"
            + "upstream: https://api.example.com\nupstream_ca: missing-ca.pem\nroutes: [{ prefix: /api/ }]\n")], expected: [
            #"conf/tenants/example.yaml:4: upstream_ca: upstream_ca applies to https:// upstreams only; "http://api.example.com:80" is plain http"#,
            #"conf/tenants/other.yaml:4: upstream_ca: CA file "conf/tenants/missing-ca.pem" does not exist"#,
        ]),
        BadCase(name: "malformed upstream", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "upstream: http://api.example.com:http/x?y\nroutes: [{ prefix: /api/ }]\n")], expected: [
            "conf/tenants/example.yaml:3: upstream: expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): a query (?), a fragment (#), a backslash or white space is not accepted (the URL is not repeated here)",
        ]),
        // Not repeated whatever is wrong: a password where the host or port goes (`%40` for `@`),
        // a key in a query, a mistyped scheme (an independent sweep, stop 36).
        BadCase(name: "refused upstreams are never repeated", files: [
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "upstream: http://svc:s3cr3tpw%40api.example.com\nroutes: [{ prefix: /api/ }]\n"),
            ("conf/tenants/other.yaml", "team_id: OTHER12345\nbundle_id: com.example.other\nupstream: https://api.example.com/v1?key=s3cr3tkey\nroutes: [{ prefix: /api/ }]\n"),
            ("conf/tenants/third.yaml", "team_id: THIRD12345\nbundle_id: com.example.third\nupstream: htps://s3cr3thost.example.com\nroutes: [{ prefix: /api/ }]\n"),
            ("conf/tenants/fourth.yaml", "team_id: FOURT12345\nbundle_id: com.example.fourth\nupstream: http://api.example.com/s3cr3t/../x\nroutes: [{ prefix: /api/ }]\n"),
        ], expected: [
            "conf/tenants/example.yaml:3: upstream: expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): the host or the port is not valid (the URL is not repeated here)",
            "conf/tenants/fourth.yaml:3: upstream: expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): the base path must be RFC 3986 path characters or %XX escapes (not %00), without . or .. segments, plain or escaped (the URL is not repeated here)",
            "conf/tenants/other.yaml:3: upstream: expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): a query (?), a fragment (#), a backslash or white space is not accepted (the URL is not repeated here)",
            "conf/tenants/third.yaml:3: upstream: expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): it does not start with http:// or https:// (the URL is not repeated here)",
        ]),
        // Never echoed: the error goes to the log and the admin reload answer (an operations
        // sweep, stop 35, found the password in both; redis.url's errors were redacted).
        BadCase(name: "upstream with credentials", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "upstream: https://svc:hunter2@api.example.com/v1\nroutes: [{ prefix: /api/ }]\n")], expected: [
            "conf/tenants/example.yaml:3: upstream: an upstream URL may not hold @ (credentials, user:password@, are not accepted, and the URL is not repeated here); expected http:// or https:// then host[:port][/base path]",
        ]),
        // Nor with a `/` in the password, or a scheme mistyped (the sweep of stop 35's fixes).
        BadCase(name: "upstream with credentials holding a slash", files: [
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "upstream: http://svc:q8Zr/Xy+Pw==@127.0.0.1:8080\nroutes: [{ prefix: /api/ }]\n"),
            ("conf/tenants/other.yaml", "team_id: OTHER12345\nbundle_id: com.example.other\nupstream: http:/svc:hunter2@h\nroutes: [{ prefix: /api/ }]\n"),
        ], expected: [
            "conf/tenants/example.yaml:3: upstream: an upstream URL may not hold @ (credentials, user:password@, are not accepted, and the URL is not repeated here); expected http:// or https:// then host[:port][/base path]",
            "conf/tenants/other.yaml:3: upstream: an upstream URL may not hold @ (credentials, user:password@, are not accepted, and the URL is not repeated here); expected http:// or https:// then host[:port][/base path]",
        ]),
        BadCase(name: "bad resolver", files: [("conf/gateway.yaml", gatewayWith("resolver:\n  nameservers: [10.0.0.2, dns.internal, \"10.0.0.2:0\"]\n  timeout: 0s\n"))], expected: [
            #"conf/gateway.yaml:7: resolver.nameservers[1]: expected an IP address with an optional port (10.0.0.2, 10.0.0.2:5353, [fd00::2]:53), got "dns.internal""#,
            #"conf/gateway.yaml:7: resolver.nameservers[2]: expected an IP address with an optional port (10.0.0.2, 10.0.0.2:5353, [fd00::2]:53), got "10.0.0.2:0""#,
            "conf/gateway.yaml:8: resolver.timeout: must be greater than zero",
        ]),
        // Every entry refused is not also an empty list (stop 35's newcomer sweep).
        BadCase(name: "resolver with no valid name server", files: [("conf/gateway.yaml", gatewayWith("resolver:\n  nameservers: [not-an-ip]\n"))], expected: [
            #"conf/gateway.yaml:7: resolver.nameservers[0]: expected an IP address with an optional port (10.0.0.2, 10.0.0.2:5353, [fd00::2]:53), got "not-an-ip""#,
        ]),
        BadCase(name: "empty resolver list", files: [("conf/gateway.yaml", gatewayWith("resolver:\n  nameservers: []\n"))], expected: [
            "conf/gateway.yaml:7: resolver.nameservers: expected at least one name server (leave the key out to use /etc/resolv.conf)",
        ]),
        BadCase(name: "missing required keys", files: [
            ("conf/gateway.yaml", "tokens:\n  keys:\n    - file: ../.run/keys/dev-es256-1.pem\n"),
            ("conf/tenants/example.yaml", "bundle_id: com.example.app\nroutes:\n  - prefix: /api/\n"),
        ], expected: [
            "conf/gateway.yaml:1: tokens.issuer: missing required key",
            "conf/gateway.yaml:3: tokens.keys[0].kid: missing required key",
            "conf/tenants/example.yaml:1: team_id: missing required key",
            "conf/tenants/example.yaml:1: upstream: missing required key (routes are proxied to it)",
        ]),
        BadCase(name: "empty files", files: [("conf/gateway.yaml", "# nothing yet\n"), ("conf/tenants/example.yaml", "")], expected: [
            "conf/gateway.yaml:1: tokens: missing required key",
            "conf/tenants/example.yaml:1: team_id: missing required key",
            "conf/tenants/example.yaml:1: bundle_id: missing required key",
        ]),
        BadCase(name: "duplicate App ID across files", files: [
            ("conf/tenants/example.yaml", nil),
            ("conf/tenants/a-first.yaml", ConfigFixture.minimalTenant),
            ("conf/tenants/b-second.yml", "# copy\n" + ConfigFixture.minimalTenant),
        ], expected: [
            "conf/tenants/b-second.yml:3: bundle_id: duplicate App ID ABCDE12345.com.example.app, already defined in conf/tenants/a-first.yaml:2",
        ]),
        BadCase(name: "unreadable tenant file", files: [], directories: ["conf/tenants/broken.yaml"], expected: [
            "conf/tenants/broken.yaml: file is a directory",
        ]),
        BadCase(name: "missing gateway file", files: [], checkPath: "conf/nope.yaml", expected: [
            "conf/nope.yaml: file does not exist",
        ]),
        BadCase(name: "missing tenants directory", files: [("conf/gateway.yaml", gatewayWith("tenants_dir: ../elsewhere\n"))], expected: [
            #"conf/gateway.yaml:6: tenants_dir: directory "conf/../elsewhere" does not exist or is not a directory"#,
        ]),
        BadCase(name: "missing referenced files", files: [("conf/gateway.yaml", """
            tokens:
              issuer: x
              keys:
                - kid: k1
                  file: keys/missing.pem
            server:
              tls:
                cert: tls/cert.pem
            app_attest:
              test_ca: /nonexistent/test-ca.pem
            admin:
              token_file: admin-token

            """)], expected: [
            #"conf/gateway.yaml:5: tokens.keys[0].file: key file "conf/keys/missing.pem" does not exist"#,
            "conf/gateway.yaml:7: server.tls.key: missing required key",
            #"conf/gateway.yaml:8: server.tls.cert: certificate file "conf/tls/cert.pem" does not exist"#,
            #"conf/gateway.yaml:10: app_attest.test_ca: test CA file "/nonexistent/test-ca.pem" does not exist"#,
            #"conf/gateway.yaml:12: admin.token_file: admin token file "conf/admin-token" does not exist"#,
        ]),
        BadCase(name: "default admin token file missing", files: [(".run/admin-token", nil)], expected: [
            #"conf/gateway.yaml:54: admin.token_file: admin token file "conf/../.run/admin-token" does not exist"#,
        ]),
        BadCase(name: "an invalid token_env does not excuse a missing token file", files: [
            (".run/admin-token", nil),
            ("conf/gateway.yaml", gatewayWith("admin:\n  token_file: ../.run/admin-token\n  token_env: \"1BAD\"\n")),
        ], expected: [
            #"conf/gateway.yaml:7: admin.token_file: admin token file "conf/../.run/admin-token" does not exist"#,
            #"conf/gateway.yaml:8: admin.token_env: expected an environment variable name (letters, digits, _), got "1BAD""#,
        ]),
        BadCase(name: "a null token_env leaves the default admin token file in force", files: [
            (".run/admin-token", nil), ("conf/gateway.yaml", gatewayWith("admin:\n  token_env: ~\n")),
        ], expected: [
            #"conf/gateway.yaml:6: admin.token_file: admin token file "conf/../.run/admin-token" (the default) does not exist; create it or set admin.token_file or admin.token_env"#,
        ]),
        BadCase(name: "empty admin token file", files: [(".run/admin-token", " \n")], expected: [
            #"conf/gateway.yaml:54: admin.token_file: admin token file "conf/../.run/admin-token" holds no token, and the admin API would refuse every call; write one into it (openssl rand -hex 32)"#,
        ]),
        BadCase(name: "empty default admin token file in a minimal gateway", files: [
            (".run/admin-token", ""), ("conf/gateway.yaml", ConfigFixture.minimalGateway),
        ], expected: [
            #"conf/gateway.yaml:1: admin.token_file: admin token file "conf/../.run/admin-token" (the default) holds no token, and the admin API would refuse every call; write one into it (openssl rand -hex 32)"#,
        ]),
        BadCase(name: "default admin token file missing in a minimal gateway", files: [
            (".run/admin-token", nil), ("conf/gateway.yaml", ConfigFixture.minimalGateway),
        ], expected: [
            #"conf/gateway.yaml:1: admin.token_file: admin token file "conf/../.run/admin-token" (the default) does not exist; create it or set admin.token_file or admin.token_env"#,
        ]),
        BadCase(name: "invalid YAML syntax", files: [("conf/tenants/example.yaml", "team_id: ABCDE12345\nbundle_id: [com.example.app\ntier: free\n")], expected: [
            "conf/tenants/example.yaml:3: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 2)",
        ]),
        BadCase(name: "duplicate key", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "tier: pro\ntier: free\n")], expected: [
            #"conf/tenants/example.yaml:4: duplicate key "tier" (first defined at line 3)"#,
        ]),
        BadCase(name: "aliases refused", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "custom_claims: &c {a: 1}\ntoken: *c\n")], expected: [
            "conf/tenants/example.yaml:3: YAML anchors (&name) are not supported",
        ]),
        BadCase(name: "tags refused", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "tier: !!str free\n")], expected: [
            "conf/tenants/example.yaml:3: YAML tags (tag:yaml.org,2002:str) are not supported",
        ]),
        BadCase(name: "bad enum", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: staging
            upstream: http://127.0.0.1:9000
            routes:
              - prefix: /api/
              - prefix: /other/
                auth: maybe

            """)], expected: [
            #"conf/tenants/example.yaml:3: environment: expected one of development, production, got "staging""#,
            #"conf/tenants/example.yaml:8: routes[1].auth: expected one of required, none, got "maybe""#,
        ]),
        BadCase(name: "route prefix under gateway endpoints", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            upstream: http://127.0.0.1:9000/base/
            routes:
              - prefix: /api/v1/attestation/extra
              - prefix: /healthz
              - prefix: /.well-known/
              - prefix: api/
              - prefix: /ok/
              - prefix: /ok/

            """)], expected: [
            #"conf/tenants/example.yaml:5: routes[0].prefix: "/api/v1/attestation/extra" is under /api/v1/attestation, which the gateway serves itself"#,
            #"conf/tenants/example.yaml:6: routes[1].prefix: "/healthz" is under /healthz, which the gateway serves itself"#,
            #"conf/tenants/example.yaml:7: routes[2].prefix: "/.well-known/" is under /.well-known, which the gateway serves itself"#,
            #"conf/tenants/example.yaml:8: routes[3].prefix: expected a path prefix starting with / (printable ASCII, no query, fragment, . or .. segments), got "api/""#,
            #"conf/tenants/example.yaml:10: routes[5].prefix: duplicate route prefix "/ok/" (also routes[4])"#,
        ]),
        BadCase(name: "two active keys", files: [("conf/gateway.yaml", """
            tokens:
              issuer: x
              keys:
                - kid: k1
                  file: ../.run/keys/dev-es256-1.pem
                  active: true
                - kid: k2
                  algorithm: RS256
                  file: ../.run/keys/dev-es256-1.pem
                  active: true

            """)], expected: [
            "conf/gateway.yaml:10: tokens.keys[1].active: only one key may be active; tokens.keys[0] is already active",
        ]),
        BadCase(name: "no active key, duplicate kid, bad algorithm", files: [("conf/gateway.yaml", """
            tokens:
              issuer: x
              keys:
                - kid: k1
                  file: ../.run/keys/dev-es256-1.pem
                - kid: k1
                  algorithm: es256
                  file: ../.run/keys/dev-es256-1.pem

            """)], expected: [
            "conf/gateway.yaml:3: tokens.keys: exactly one key must have active: true, found none",
            #"conf/gateway.yaml:6: tokens.keys[1].kid: duplicate kid "k1" (first used at line 4)"#,
            #"conf/gateway.yaml:7: tokens.keys[1].algorithm: expected one of ES256, RS256, got "es256""#,
        ]),
        BadCase(name: "unknown tier", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "environment: development\ntier: platinum\n")], expected: [
            #"conf/tenants/example.yaml:4: tier: unknown tier "platinum"; defined tiers: business, enterprise, free, pro"#,
        ]),
        BadCase(name: "bad tiers", files: [("conf/gateway.yaml", gatewayWith("""
            tiers:
              pro: { api: 0 }
              gold: { attest: 1, challenge: 2, api: 3 }
              Bad: { attest: 1, challenge: 2, api: 3, mad_limit: 4 }
              enterprise: { mad_limit: infinite }

            """))], expected: [
            "conf/gateway.yaml:7: tiers.pro.api: expected an integer from 1 to 100000000, got 0",
            "conf/gateway.yaml:8: tiers.gold.mad_limit: missing required key",
            "conf/gateway.yaml:9: tiers.Bad: tier names use lowercase letters, digits, - and _ (at most 32 characters)",
            #"conf/gateway.yaml:10: tiers.enterprise.mad_limit: expected a positive integer or unlimited, got "infinite""#,
        ]),
        BadCase(name: "test CA on a production tenant", files: [
            ("conf/gateway.yaml", gatewayWith("app_attest:\n  test_ca: Apple_App_Attestation_Root_CA.pem\n")),
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant),
            ("conf/tenants/prod2.yaml", "team_id: ABCDE12345\nbundle_id: com.example.other\nenvironment: production\n"),
            ("conf/tenants/dev.yaml", "team_id: ABCDE12345\nbundle_id: com.example.dev\nenvironment: development\n"),
            // A refused environment is only that: not also a production tenant's test CA (the
            // newcomer sweep of stop 35 found the second error).
            ("conf/tenants/staging.yaml", "team_id: ABCDE12345\nbundle_id: com.example.staging\nenvironment: staging\n"),
        ], expected: [
            "conf/tenants/example.yaml:1: environment: a production tenant cannot trust the test CA (app_attest.test_ca); use environment: development or set app_attest.allow_test_ca: true",
            "conf/tenants/prod2.yaml:3: environment: a production tenant cannot trust the test CA (app_attest.test_ca); use environment: development or set app_attest.allow_test_ca: true",
            #"conf/tenants/staging.yaml:3: environment: expected one of development, production, got "staging""#,
        ]),
        BadCase(name: "bad tenant identity and token", files: [("conf/tenants/example.yaml", """
            team_id: abcde12345
            bundle_id: com..app
            token:
              header: "X-Attest-Token"
              ttl: 0s
            \(routesLast)
            """)], expected: [
            #"conf/tenants/example.yaml:1: team_id: expected 10 uppercase letters or digits (an Apple team ID), got "abcde12345""#,
            #"conf/tenants/example.yaml:2: bundle_id: expected a reverse-DNS bundle ID like com.example.app (letters, digits, - in dot-separated parts), got "com..app""#,
            "conf/tenants/example.yaml:4: token.header: X-Attest-* headers are removed from every request before forwarding; choose another header",
            "conf/tenants/example.yaml:5: token.ttl: must be greater than zero",
        ]),
        // A header the gateway reads for something else (X-Team-ID was accepted until stop 32,
        // and its tenant could not be reached with a token).
        BadCase(name: "a token header the gateway reads for something else", files: [("conf/tenants/example.yaml",
            ConfigFixture.minimalTenant + "token:\n  header: x_team_id\n" + routesLast)], expected: [
            "conf/tenants/example.yaml:4: token.header: x_team_id is a header the gateway or HTTP itself reads for something else; choose another header",
        ]),
        // `Proxy` and `Forwarded`, which the proxy removes (or keeps only from trusted peers),
        // would have been passed upstream as the token header with forward_authorization (a
        // sweep of stop 35's fixes: a client's httpoxy `Proxy` reached the upstream).
        BadCase(name: "Proxy or Forwarded as the token header", files: [
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant + "token:\n  header: PROXY\nforward:\n  forward_authorization: true\n" + routesLast),
            ("conf/tenants/other.yaml", "team_id: OTHER12345\nbundle_id: com.example.other\ntoken:\n  header: Forwarded\n" + routesLast),
            // Any X-Forwarded-* (stop 36's sweep of the README's claims: -Port was accepted).
            ("conf/tenants/third.yaml", "team_id: THIRD12345\nbundle_id: com.example.third\ntoken:\n  header: X-Forwarded-Port\n" + routesLast),
        ], expected: [
            "conf/tenants/example.yaml:4: token.header: PROXY is a header the gateway or HTTP itself reads for something else; choose another header",
            "conf/tenants/other.yaml:4: token.header: Forwarded is a header the gateway or HTTP itself reads for something else; choose another header",
            "conf/tenants/third.yaml:4: token.header: X-Forwarded-Port is a header the gateway or HTTP itself reads for something else; choose another header",
        ]),
        BadCase(name: "bad forwarding", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: development
            forward:
              claims:
                sub: X-Device
                subjct: X-Subject
                sub.x: X-Sub-X
                custom_claims.plan: x_device
                team_id: Host
                bundle_id: "Bad Header"
              payload_header: true
              forward_authorization: "no"
            custom_claims:
              subscription: {tier: gold}
              ratio: .inf
              huge: 123456789012345678901234567890
              quoted: "123456789012345678901234567890"
              nested: [-99999999999999999999]
              plan:
              region: ~
              meta: {store: null, ok: 1, list: [a, null]}
              spelled: "null"
            \(routesLast)
            """)], expected: [
            #"conf/tenants/example.yaml:7: forward.claims.subjct: unknown claim "subjct"; claims: iss, aud, sub, iat, nbf, exp, jti, team_id, bundle_id, subject_id, custom_claims (custom_claims.<path> for nested values)"#,
            #"conf/tenants/example.yaml:8: forward.claims.sub.x: unknown claim "sub.x"; claims: iss, aud, sub, iat, nbf, exp, jti, team_id, bundle_id, subject_id, custom_claims (custom_claims.<path> for nested values)"#,
            "conf/tenants/example.yaml:9: forward.claims.custom_claims.plan: header x_device is already used by forward.claims.sub",
            "conf/tenants/example.yaml:10: forward.claims.team_id: Host is managed by the proxy and cannot carry claims",
            #"conf/tenants/example.yaml:11: forward.claims.bundle_id: expected an HTTP header name, got "Bad Header""#,
            "conf/tenants/example.yaml:12: forward.payload_header: expected a header name, or false to disable, got true",
            #"conf/tenants/example.yaml:13: forward.forward_authorization: expected true or false, got "no""#,
            "conf/tenants/example.yaml:15: custom_claims.subscription: reserved: the subscription claim is set per subject through the admin API",
            "conf/tenants/example.yaml:16: custom_claims.ratio: JSON has no infinity or NaN; quote it to send a string",
            "conf/tenants/example.yaml:17: custom_claims.huge: integer out of range (a 64-bit integer: -9223372036854775808 to 9223372036854775807); quote it to send a string",
            "conf/tenants/example.yaml:19: custom_claims.nested[0]: integer out of range (a 64-bit integer: -9223372036854775808 to 9223372036854775807); quote it to send a string",
            "conf/tenants/example.yaml:20: custom_claims.plan: null is not a claim value (tokens omit claims without one, never send null): remove it or give it a value",
            "conf/tenants/example.yaml:21: custom_claims.region: null is not a claim value (tokens omit claims without one, never send null): remove it or give it a value",
            "conf/tenants/example.yaml:22: custom_claims.meta.store: null is not a claim value (tokens omit claims without one, never send null): remove it or give it a value",
            "conf/tenants/example.yaml:22: custom_claims.meta.list[1]: null is not a claim value (tokens omit claims without one, never send null): remove it or give it a value",
        ]),
        BadCase(name: "payload header clashing with a default claim header", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: development
            forward:
              payload_header: x-attest-key_id
            \(routesLast)
            """)], expected: [
            "conf/tenants/example.yaml:5: forward.payload_header: header x-attest-key_id is already used by the default forward.claims.sub",
        ]),
        // The tenant selectors and `Expect` are read by the gateway or the upstream's HTTP for
        // something else (a newcomer sweep, stop 35, found `bundle_id: X-Team-ID` accepted: the
        // client's selector replaced upstream by the bundle ID).
        BadCase(name: "claim headers the gateway reads for something else", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: development
            forward:
              claims: { bundle_id: X-Team-ID, team_id: x_bundle_id, sub: Expect, iss: Proxy-Issuer, aud: X-Forwarded-Prefix }
              payload_header: X-Bundle-Id
            \(routesLast)
            """)], expected: [
            "conf/tenants/example.yaml:5: forward.claims.bundle_id: X-Team-ID is managed by the proxy and cannot carry claims",
            "conf/tenants/example.yaml:5: forward.claims.team_id: x_bundle_id is managed by the proxy and cannot carry claims",
            "conf/tenants/example.yaml:5: forward.claims.sub: Expect is managed by the proxy and cannot carry claims",
            "conf/tenants/example.yaml:5: forward.claims.iss: Proxy-Issuer is managed by the proxy and cannot carry claims",
            "conf/tenants/example.yaml:5: forward.claims.aud: X-Forwarded-Prefix is managed by the proxy and cannot carry claims",
            "conf/tenants/example.yaml:6: forward.payload_header: X-Bundle-Id is managed by the proxy and cannot carry claims",
        ]),
        BadCase(name: "claim header clashing with the default payload header", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: development
            forward:
              claims: { sub: X-Attest-Claims }
            \(routesLast)
            """)], expected: [
            "conf/tenants/example.yaml:5: forward.claims.sub: header X-Attest-Claims is already used by the default forward.payload_header",
        ]),
        BadCase(name: "proxy keys without routes", files: [
            ("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
                environment: development
                token: { audience: my-api, header: X-App-Token }
                upstream: https://127.0.0.1:9443
                upstream_ca: ../Apple_App_Attestation_Root_CA.pem
                forward:
                  claims: { sub: X-Device }
                  payload_header: X-Claims
                  forward_authorization: true

                """),
            ("conf/tenants/empty-routes.yaml", "team_id: ABCDE12345\nbundle_id: com.example.other\nenvironment: development\n"
                + "upstream: http://127.0.0.1:9000\nroutes: []\nforward: { payload_header: ~ }\n"),
        ], expected: [
            "conf/tenants/empty-routes.yaml:4: upstream: has no effect without routes; add routes or remove it",
            "conf/tenants/empty-routes.yaml:6: forward.payload_header: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:4: token.header: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:5: upstream: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:6: upstream_ca: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:8: forward.claims: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:9: forward.payload_header: has no effect without routes; add routes or remove it",
            "conf/tenants/example.yaml:10: forward.forward_authorization: has no effect without routes; add routes or remove it",
        ]),
        BadCase(name: "bad platform SSO", files: [("conf/tenants/example.yaml", ConfigFixture.minimalTenant + """
            environment: development
            platform_sso:
              path_prefix: /.well-known/psso
              audience: https://idp.example.com
              nonce_claim_name: "request-nonce"

            """)], expected: [
            "conf/tenants/example.yaml:4: platform_sso.client_id: missing required key",
            #"conf/tenants/example.yaml:5: platform_sso.path_prefix: "/.well-known/psso" is under /.well-known, which the gateway serves itself"#,
            #"conf/tenants/example.yaml:6: platform_sso.audience: expected a list of absolute URLs (the token and refresh URLs the Macs are configured with), got "https://idp.example.com""#,
            #"conf/tenants/example.yaml:7: platform_sso.nonce_claim_name: expected a claim name (letters, digits, _), got "request-nonce""#,
        ]),
    ]

    /// A tenant file whose name is not UTF-8 is named as such, with its bytes escaped (an
    /// operations sweep, stop 35: Foundation's listing made a name that does not exist, and
    /// every reload failed with "does not exist"); the other files still load.
    @Test func aTenantFileNameThatIsNotUTF8IsNamed() throws {
        let fixture = try ConfigFixture()
        var name = Array((fixture.root + "/conf/tenants/caf").utf8) + [0xE9] + Array(".yaml".utf8) + [0]
        let descriptor = name.withUnsafeMutableBufferPointer { creat($0.baseAddress!, 0o644) }
        try #require(descriptor >= 0)
        let text = Array("team_id: ZZZZZ12345\nbundle_id: com.example.cafe\n".utf8)
        _ = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        #expect(fixture.problems() == [#"conf/tenants/caf\xE9.yaml: the file name is not valid UTF-8; rename the file"#])
    }

    @Test(arguments: badCases)
    func badConfigurationIsRejected(_ badCase: BadCase) throws {
        let fixture = try ConfigFixture()
        for directory in badCase.directories { try fixture.makeDirectory(directory) }
        for (path, content) in badCase.files {
            if let content { try fixture.write(path, content) } else { try fixture.remove(path) }
        }
        let problems = fixture.problems(path: badCase.checkPath.map { fixture.root + "/" + $0 })
        #expect(problems == badCase.expected)
        #expect(throws: ConfigError.self) {
            try ConfigLoader.load(path: badCase.checkPath.map { fixture.root + "/" + $0 } ?? fixture.gatewayPath)
        }
    }
}
