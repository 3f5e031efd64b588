import AGDevTools
import AGTestSupport
import Foundation
import Testing

/// Upstreams at host names through the real gateway (issue 13 item 1): resolved by a real DNS
/// server (`TestDNSServer`) named in `resolver.nameservers`, answers cached for their TTL,
/// several addresses tried in turn, failures answered 502 with the envelope and never stalling
/// the worker. Before this, an upstream host name was refused at load time.
@Suite("upstreams at host names")
struct UpstreamHostNameEndToEndTests {
    /// A gateway whose tenants proxy `/public` (no token) to the given upstream URLs, resolving
    /// names with `dns` only. One worker: "the same worker" is then every request.
    struct Setup {
        let gateway: TestGateway
        /// Team id of each tenant, by the key given to `start`.
        let teams: [String: String]

        init(dns: TestDNSServer, upstreams: [String: String], resolverTimeout: String = "1s", workers: Int = 1,
             tenantExtra: [String: String] = [:], files: [String: String] = [:]) throws {
            var teams: [String: String] = [:]
            var tenants: [String: String] = [:]
            for (key, url) in upstreams {
                let team = TestGateway.randomTeamID()
                teams[key] = team
                tenants["\(key).yaml"] = TestGateway.tenantYAML(teamID: team, extra: """
                    upstream: \(url)
                    routes:
                      - { prefix: /public, auth: none }
                    \(tenantExtra[key] ?? "")
                    """)
            }
            self.teams = teams
            gateway = try TestGateway(tenants: tenants, gatewayYAML: """
                resolver:
                  nameservers: ["\(dns.nameserver)"]
                  timeout: \(resolverTimeout)
                """, files: files, workers: workers)
        }

        func get(_ key: String, _ path: String = "/public/x") throws -> TestResponse {
            try gateway.send("GET", path, headers: [("X-Team-ID", teams[key]!), ("X-Bundle-ID", "com.example.app")])
        }

        /// The summed value of an upstream error series for one tenant.
        func upstreamErrors(_ key: String, _ kind: String) throws -> Int {
            let series = "attestgate_upstream_errors_total{tenant=\"\(teams[key]!).com.example.app\",error=\"\(kind)\"} "
            let text = try gateway.admin("GET", "/metrics").text
            return text.split(separator: "\n").filter { $0.hasPrefix(series) }.compactMap { Int($0.dropFirst(series.count)) }.reduce(0, +)
        }
    }

    @Test func aHostNameIsResolvedByTheConfiguredNameServerAndProxied() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let dns = try await TestDNSServer.start(["api.test": .init(a: ["127.0.0.1"], ttl: 600)])
        let setup = try Setup(dns: dns, upstreams: ["api": "http://API.test:\(upstream.port)/base"])
        defer { setup.gateway.stop() }
        for path in ["/public/a", "/public/b", "/public/c"] {
            let response = try setup.get("api", path)
            #expect(response.status == 200, "\(response.text)")
        }
        #expect(upstream.records.map(\.target) == ["/base/public/a", "/base/public/b", "/base/public/c"])
        #expect(upstream.records.first?.header("Host") == "API.test:\(upstream.port)", "the name as configured")
        #expect(dns.queries("api.test") == 1, "asked once, then cached for the TTL")
        #expect(upstream.connectionCount == 1, "the pooled connection is reused")
    }

    @Test func aChangedAnswerIsUsedOnceItsTTLHasPassed() async throws {
        // Two hosts behind each name: 127.0.0.2 and 127.0.0.3 on one port.
        let before = try RecordingUpstream(address: "127.0.0.2")
        defer { before.stop() }
        let after = try RecordingUpstream(address: "127.0.0.3", port: before.port)
        defer { after.stop() }
        let dns = try await TestDNSServer.start(["long.test": .init(a: ["127.0.0.2"], ttl: 600),
                                                 "short.test": .init(a: ["127.0.0.2"], ttl: 1)])
        let setup = try Setup(dns: dns, upstreams: ["long": "http://long.test:\(before.port)",
                                                    "short": "http://short.test:\(before.port)"])
        defer { setup.gateway.stop() }
        #expect(try setup.get("long", "/public/long-1").status == 200)
        #expect(try setup.get("short", "/public/short-1").status == 200)
        try dns.setZone(["long.test": .init(a: ["127.0.0.3"], ttl: 600), "short.test": .init(a: ["127.0.0.3"], ttl: 1)])

        // Within its TTL the old answer holds, warm connection or not.
        #expect(try setup.get("long", "/public/long-2").status == 200)
        #expect(before.records.map(\.target).contains("/public/long-2"))
        #expect(dns.queries("long.test") == 1)
        // The 1 s TTL passes on the resolver's real clock: the new address gets the requests,
        // although a warm connection to the old one sits in the pool.
        #expect(eventually(15) {
            (try? setup.get("short", "/public/short-n"))?.status == 200 && after.records.contains { $0.target == "/public/short-n" }
        })
        #expect(dns.queries("short.test") >= 2)
        #expect(!after.records.contains { $0.target.hasPrefix("/public/long") })
    }

    @Test func theAddressesOfANameAreTriedInTurn() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        // 127.0.0.2 refuses connections on the port: nothing listens there.
        let dns = try await TestDNSServer.start(["multi.test": .init(a: ["127.0.0.2", "127.0.0.1"], ttl: 600),
                                                 "dead.test": .init(a: ["127.0.0.2", "127.0.0.4"], ttl: 600)])
        let setup = try Setup(dns: dns, upstreams: ["multi": "http://multi.test:\(upstream.port)",
                                                    "dead": "http://dead.test:\(upstream.port)"])
        defer { setup.gateway.stop() }
        for _ in 0..<3 {
            let response = try setup.get("multi")
            #expect(response.status == 200, "\(response.text)")
        }
        #expect(upstream.records.count == 3)
        #expect(try setup.upstreamErrors("multi", "connect_failed") == 0, "a refused first address is not an error")

        let refused = try setup.get("dead")
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(refused.json["requestId"] as? String == refused.header("X-Request-ID"))
        #expect(try setup.upstreamErrors("dead", "connect_failed") == 1)
        #expect(eventually { setup.gateway.logText().contains("every one of 2 addresses of dead.test failed") },
                "the log says why: \(setup.gateway.logText())")
    }

    @Test func whenEveryAddressFailedTheNameIsAskedAgainBeforeItsTTL() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        // The service moved: the cached answer (TTL 600) names an address that now refuses.
        let dns = try await TestDNSServer.start(["moved.test": .init(a: ["127.0.0.2"], ttl: 600)])
        let setup = try Setup(dns: dns, upstreams: ["moved": "http://moved.test:\(upstream.port)"])
        defer { setup.gateway.stop() }
        let refused = try setup.get("moved")
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        try dns.setZone(["moved.test": .init(a: ["127.0.0.1"], ttl: 600)])
        #expect(try setup.get("moved").status == 200)
        #expect(dns.queries("moved.test") == 2, "asked again at once, not after the TTL")
        #expect(upstream.records.count == 1)
    }

    @Test func aNameThatDoesNotResolveIs502AndAskedAgainNextTime() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let dns = try await TestDNSServer.start([:])
        let setup = try Setup(dns: dns, upstreams: ["missing": "http://missing.test:\(upstream.port)"])
        defer { setup.gateway.stop() }
        let refused = try setup.get("missing")
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(refused.json["requestId"] as? String == refused.header("X-Request-ID"))
        #expect(!refused.text.contains("missing.test"), "the client does not learn internal names")
        #expect(try setup.upstreamErrors("missing", "resolve_failed") == 1)
        #expect(eventually { setup.gateway.logText().contains("cannot resolve 'missing.test'") }, "\(setup.gateway.logText())")
        #expect(upstream.records.isEmpty)

        // A failure is not cached: once the name exists, the next request reaches it.
        try dns.setZone(["missing.test": .init(a: ["127.0.0.1"], ttl: 600)])
        #expect(try setup.get("missing").status == 200)
        #expect(dns.queries("missing.test") == 2)
    }

    @Test func aSilentNameServerCostsAtMostTheResolverTimeoutAndNeverStallsTheWorker() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let dns = try await TestDNSServer.start(["black.test": .init(a: ["127.0.0.1"], mode: "drop"),
                                                 "fine.test": .init(a: ["127.0.0.1"], ttl: 600)])
        let setup = try Setup(dns: dns, upstreams: ["black": "http://black.test:\(upstream.port)",
                                                    "fine": "http://fine.test:\(upstream.port)"], resolverTimeout: "3s")
        defer { setup.gateway.stop() }
        let black = startOnThread { () -> (TestResponse, Duration) in
            let started = ContinuousClock.now
            let response = try setup.get("black")
            return (response, ContinuousClock.now - started)
        }
        // The one worker answers other requests while the lookup waits.
        #expect(eventually(10) { dns.queries("black.test") >= 1 })
        let meanwhile = ContinuousClock.now
        #expect(try setup.gateway.send("GET", "/healthz").status == 200)
        #expect(try setup.get("fine").status == 200)
        let otherRequests = ContinuousClock.now - meanwhile
        let (response, elapsed) = try await black.value
        #expect(otherRequests < elapsed, "answered while the silent lookup was pending (\(otherRequests) vs \(elapsed))")
        #expect(response.status == 502)
        #expect(response.code == "upstream_unavailable")
        #expect(elapsed >= .milliseconds(2500), "\(elapsed)")
        #expect(elapsed < .seconds(6), "resolver.timeout bounds the whole lookup, retry included: \(elapsed)")
        #expect(try setup.upstreamErrors("black", "resolve_failed") == 1)
        #expect(upstream.records.map(\.target) == ["/public/x"], "only the other tenant's request")
    }

    @Test func theResolverIsRestartOnly() async throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let first = try await TestDNSServer.start(["fresh.test": .init(a: ["127.0.0.1"], ttl: 600)])
        let second = try await TestDNSServer.start([:])
        let setup = try Setup(dns: first, upstreams: ["fresh": "http://fresh.test:\(upstream.port)"])
        defer { setup.gateway.stop() }
        let path = setup.gateway.config.gatewayPath
        let yaml = try TestFile.text(path)
        try #require(yaml.contains(first.nameserver))
        try yaml.replacingOccurrences(of: first.nameserver, with: second.nameserver).write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try setup.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(setup.gateway.logText().contains(#""msg":"setting changed on reload takes effect after a restart","key":"resolver""#))
        // The first lookup after the reload still goes to the server the workers started with.
        #expect(try setup.get("fresh").status == 200)
        #expect(first.queries("fresh.test") == 1)
        #expect(second.queries("fresh.test") == 0)
    }

    @Test func checkConfigAcceptsHostNamesAndHTTPSUpstreams() throws {
        let ca = try TestCertificateAuthority.generate().certificate.pemRepresentation
        let config = try TestConfigDirectory(tenants: [
            "k8s.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID(), extra: """
                upstream: http://api.default.svc.cluster.local:8080/v1
                routes: [{ prefix: /a, auth: none }]
                """),
            "tls.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID(), extra: """
                upstream: https://api.internal:8443
                upstream_ca: ../upstream-ca.pem
                routes: [{ prefix: /b, auth: none }]
                """),
            "system.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID(), extra: """
                upstream: https://api.example.com
                routes: [{ prefix: /c, auth: none }]
                """),
        ], gatewayYAML: "resolver: { nameservers: [\"10.0.0.2\", \"[fd00::53]:5353\"], timeout: 2s }\n",
           files: ["upstream-ca.pem": ca])
        let binary = TestGateway.builtProductPath("attestgate")
        let checked = try runProgram(binary, ["check-config", config.gatewayPath], mergingErrors: true)
        #expect(checked.status == 0, "\(String(decoding: checked.output, as: UTF8.self))")

        // A name that cannot be one is still refused, at its line.
        try config.writeTenant("k8s.yaml", TestGateway.tenantYAML(teamID: TestGateway.randomTeamID(), extra: """
            upstream: http://api_.bad..name:8080
            routes: [{ prefix: /a, auth: none }]
            """))
        let refused = try runProgram(binary, ["check-config", config.gatewayPath], mergingErrors: true)
        let output = String(decoding: refused.output, as: UTF8.self)
        #expect(refused.status == 1)
        #expect(output.contains("k8s.yaml:") && output.contains("upstream: expected http:// or https://"), "\(output)")
    }
}
