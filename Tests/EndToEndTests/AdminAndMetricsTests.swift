import AGTestSupport
import Foundation
import Testing

@Suite("admin listener basics, end to end")
struct AdminAndMetricsTests {
    @Test func everyAdminCallNeedsTheBearerToken() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID())])
        defer { gateway.stop() }
        let token = gateway.adminToken
        for headers in [[], [("Authorization", "Bearer wrong")], [("Authorization", "Basic \(token)")],
                        [("Authorization", "Bearer")], [("Authorization", "Bearer \(token)x")],
                        [("Authorization", "Bearer \(token.dropLast())")], [("Authorization", "Bearerx \(token)")],
                        // Twice, either copy holding the token (the first decided until stop 32).
                        [("Authorization", "Bearer \(token)"), ("Authorization", "Bearer wrong")],
                        [("Authorization", "Bearer wrong"), ("Authorization", "Bearer \(token)")]] {
            let response = try HTTPTestClient.send(port: gateway.adminPort, "GET", "/metrics", headers: headers)
            #expect(response.status == 401, "\(headers)")
            #expect(response.code == "unauthorized")
            #expect(response.header("WWW-Authenticate") == "Bearer")
        }
        // The scheme is case-insensitive and may be followed by more than one space (RFC 9110
        // section 11.1, 11.4), as the proxy already read it.
        for value in ["bearer \(token)", "BEARER \(token)", "Bearer  \(token)"] {
            let response = try HTTPTestClient.send(port: gateway.adminPort, "GET", "/metrics", headers: [("Authorization", value)])
            #expect(response.status == 200, "\(value.prefix(8))")
            #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
        }
        let unknown = try gateway.admin("GET", "/admin/v1/nothing")
        #expect(unknown.status == 404)
        #expect(unknown.code == "not_found")
    }

    /// A known admin path with the wrong method answers 405 `method_not_allowed` with `Allow`,
    /// as the public listener and the Platform SSO admin paths do; these answered 404 before.
    /// An unknown path, or a tenant that is not there, stays 404. Nothing is changed.
    @Test func aWrongMethodOnAnAdminPathIsMethodNotAllowed() throws {
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        let app = "/admin/v1/tenants/\(teamID).com.example.app"
        let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        let rows: [(String, String, String)] = [
            ("DELETE", "/metrics", "GET, HEAD"), ("GET", "/admin/v1/reload", "POST"),
            ("GET", "/admin/v1/store/acknowledge-reset", "POST"), ("POST", "/admin/v1/tenants", "GET, HEAD"),
            ("DELETE", "/admin/v1/tiers", "GET, HEAD"), ("POST", "/admin/v1/tiers/free", "PUT, DELETE"),
            ("DELETE", app, "GET, HEAD"), ("GET", app + "/tier", "PUT, DELETE"), ("PUT", app + "/usage", "GET, HEAD"),
            ("DELETE", app + "/keys/" + key, "PUT, GET, HEAD"), ("GET", app + "/keys/" + key + "/revoke", "POST"),
            ("GET", app + "/subjects/00000000-0000-4000-8000-000000000000/subscription", "PUT"),
        ]
        for (method, path, allow) in rows {
            let response = try gateway.admin(method, path)
            #expect(response.status == 405, "\(method) \(path): \(response.text)")
            #expect(response.code == "method_not_allowed", "\(method) \(path)")
            #expect(response.header("Allow") == allow, "\(method) \(path)")
        }
        for (method, path) in [("GET", "/admin/v1/nothing"), ("GET", app + "/nothing"), ("DELETE", "/admin/v1/tenants/NOPE000000.x.y")] {
            let response = try gateway.admin(method, path)
            #expect(response.status == 404, "\(method) \(path): \(response.text)")
            #expect(response.code == "not_found")
        }
        #expect(try gateway.admin("GET", "/admin/v1/tiers").text.contains(#""free""#), "the tiers are untouched")

        // HEAD is GET without the body (RFC 9110 section 9.1; it was 405 until stop 32).
        for path in ["/metrics", "/admin/v1/tiers", app, app + "/usage"] {
            let get = try gateway.admin("GET", path)
            let head = try gateway.admin("HEAD", path)
            #expect(head.status == 200, "HEAD \(path): \(head.status)")
            #expect(head.body.isEmpty)
            #expect(head.header("Content-Type") == get.header("Content-Type"), "HEAD \(path)")
        }
    }

    @Test func metricsCountRequestsByTenantRouteAndCode() throws {
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        _ = try gateway.send("GET", "/api/v1/attestation/challenge", headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")])
        _ = try gateway.send("GET", "/api/v1/attestation/challenge", headers: [("X-Team-ID", "NOPE000000"), ("X-Bundle-ID", "x.y")])
        // A request is counted once its answer is out, so a scrape sent right after the answer
        // may reach another worker first: the count must show up, not in the very first scrape.
        let counted = "route=\"challenge\",status=\"401\",code=\"unknown_tenant\"} 1"
        _ = try? eventually(TestBuild.sanitizer == nil ? 5 : 20) { try gateway.admin("GET", "/metrics").text.contains(counted) }
        let metrics = try gateway.admin("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains("attestgate_requests_total{tenant=\"\(teamID).com.example.app\",route=\"challenge\",status=\"200\",code=\"\"} 1"))
        #expect(metrics.text.contains(counted))
        #expect(metrics.text.contains("attestgate_request_duration_seconds_count"))
    }

    /// The exposition as the Prometheus project's own parser reads it (`prometheus_client`,
    /// an independent reader): it parses, fresh and after traffic, and the counters an
    /// operator alerts on are there at 0 from the start — a counter first scraped at 1 is
    /// invisible to `increase()`, so an alert on the first Redis error would never fire.
    @Test func theExpositionParsesAndAlertableCountersStartAtZero() throws {
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        let fresh = try Self.parsed(gateway.admin("GET", "/metrics").text)
        for name in ["attestgate_redis_errors_total", "attestgate_store_resets_total",
                     "attestgate_token_cache_hits_total", "attestgate_token_cache_misses_total"] {
            #expect(fresh.contains("counter \(name){} 0"), "\(name): \(fresh)")
        }
        #expect(fresh.contains(#"counter attestgate_config_reloads_total{result="ok"} 0"#))
        #expect(fresh.contains(#"counter attestgate_config_reloads_total{result="rejected"} 0"#))
        #expect(fresh.contains("histogram attestgate_request_duration_seconds_count{} 0"))

        #expect(try gateway.admin("POST", "/admin/v1/reload").status == 200)
        _ = try gateway.send("GET", "/api/v1/attestation/challenge", headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")])
        let counted = #"route="challenge",status="200",tenant="\#(teamID).com.example.app"} 1"#
        var after: [String] = []
        _ = try? eventually(TestBuild.sanitizer == nil ? 5 : 20) {
            after = try Self.parsed(gateway.admin("GET", "/metrics").text)
            return after.contains { $0.hasSuffix(counted) }
        }
        #expect(after.contains { $0.hasPrefix("counter attestgate_requests_total{") && $0.hasSuffix(counted) }, "\(after)")
        #expect(after.contains(#"counter attestgate_config_reloads_total{result="ok"} 1"#), "\(after)")
        let infinity = after.first { $0.hasPrefix(#"histogram attestgate_request_duration_seconds_bucket{le="+Inf"} "#) }
        #expect(infinity.flatMap { Double($0.split(separator: " ").last!) }.map { $0 >= 1 } == true, "\(after)")
    }

    /// `metrics_families.py`: one "type name{labels} value" line per sample, or a throw when
    /// the parser refuses the text.
    static func parsed(_ exposition: String) throws -> [String] {
        let (status, output) = try runProgram("/usr/bin/env", ["python3", TestGateway.fixturePath("metrics_families.py"), exposition],
                                              mergingErrors: true)
        let text = String(decoding: output, as: UTF8.self)
        guard status == 0 else { throw ExpositionRefused(message: text) }
        return text.split(separator: "\n").map(String.init)
    }

    struct ExpositionRefused: Error, CustomStringConvertible {
        let message: String
        var description: String { "prometheus_client refused the exposition: \(message)" }
    }
}
