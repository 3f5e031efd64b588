import AGTestSupport
import Foundation
import Testing

@Suite("admin listener basics, end to end")
struct AdminAndMetricsTests {
    @Test func everyAdminCallNeedsTheBearerToken() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID())])
        defer { gateway.stop() }
        for headers in [[], [("Authorization", "Bearer wrong")], [("Authorization", "Basic \(gateway.adminToken)")]] {
            let response = try HTTPTestClient.send(port: gateway.adminPort, "GET", "/metrics", headers: headers)
            #expect(response.status == 401)
            #expect(response.code == "unauthorized")
            #expect(response.header("WWW-Authenticate") == "Bearer")
        }
        let unknown = try gateway.admin("GET", "/admin/v1/nothing")
        #expect(unknown.status == 404)
        #expect(unknown.code == "not_found")
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
}
