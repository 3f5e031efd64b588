import AGPolicy
import AGTestSupport
import Foundation
import Testing

/// A client that leaves while its proxied request waits on Redis (the `api` lease on its way):
/// nothing must reach the upstream, and the request is logged 499. An independent sweep (stop
/// 36) closed clients right after a partial body: ~10 % of them had their head sent upstream
/// anyway, the body stream waited for an end that had passed, and the upstream connection was
/// held with no timeout for minutes, then logged as an upstream error.
@Suite("proxy: a client gone before its exchange began")
struct ProxyClientGoneEarlyTests {
    @Test func aClientGoneWhileTheLeaseIsOnItsWayReachesNoUpstream() throws {
        let shared = try #require(URLComponents(string: TestGateway.sharedRedisURL))
        let relay = try DelayingRelay(targetPort: shared.port ?? 6379)
        defer { relay.stop() }
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let (first, second) = (TestGateway.randomTeamID(), TestGateway.randomTeamID())
        let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(relay.port)\(shared.path)", tenants: [
            "first.yaml": ProxyFixture.tenantYAML(teamID: first, upstreamPort: upstream.port),
            "second.yaml": ProxyFixture.tenantYAML(teamID: second, upstreamPort: upstream.port),
        ], workers: 1)
        defer { gateway.stop() }
        // The first tenant's request loads the lease script, so the held EVALSHA below runs.
        let warm = try gateway.send("GET", "/public/warm", headers: [("X-Team-ID", first), ("X-Bundle-ID", "com.example.app")])
        #expect(warm.status == 200)
        let before = upstream.records.count

        relay.hold(next: RateLimitScript.lease.sha1, for: .milliseconds(500))
        do {
            let socket = try RawTestSocket(port: gateway.port)
            socket.send("POST /public/gone HTTP/1.1\r\nHost: gw\r\nX-Team-ID: \(second)\r\nX-Bundle-ID: com.example.app\r\n"
                        + "X-Request-ID: gone-early-1\r\nContent-Length: 100\r\n\r\n{\"a\":")
            #expect(eventually(5) { relay.held == 1 }, "the second tenant's lease is held")
        }
        // The client is gone; the lease arrives after it.
        let entry = try #require(gateway.accessLogEntry(requestID: "gone-early-1"), "\(gateway.accessLogText())")
        #expect(entry["status"] as? Int == 499)
        #expect(upstream.records.count == before, "nothing of the request reached the upstream")
        let metrics = String(decoding: try gateway.admin("GET", "/metrics").body, as: UTF8.self)
        #expect(!metrics.contains("attestgate_upstream_errors_total{"), "a client that left is no upstream error")
    }
}

/// The same on the gateway's own endpoints: a client whose connection closed while the handler
/// waited on Redis is logged 499, not with the status nobody received (stop 36's sweep: a GET
/// challenge with a body and an immediate half-close was logged 200 and got no bytes).
@Suite("gateway endpoints: a client gone before the answer")
struct EndpointClientGoneTests {
    @Test func anAnswerNobodyCanReceiveIsLoggedAsAClientThatLeft() throws {
        let shared = try #require(URLComponents(string: TestGateway.sharedRedisURL))
        let relay = try DelayingRelay(targetPort: shared.port ?? 6379)
        defer { relay.stop() }
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(relay.port)\(shared.path)",
                                      tenants: ["app.yaml": TestGateway.tenantYAML(teamID: teamID)], workers: 1, redisTimeout: "2s")
        defer { gateway.stop() }
        let headers = [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")]
        // A first challenge loads the script, so the held EVALSHA below runs.
        #expect(try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).status == 200)

        relay.hold(next: DeviceScripts.takeAndIssueChallenge.sha1, for: .milliseconds(300))
        do {
            let socket = try RawTestSocket(port: gateway.port)
            socket.send("GET /api/v1/attestation/challenge HTTP/1.1\r\nHost: gw\r\nX-Team-ID: \(teamID)\r\n"
                        + "X-Bundle-ID: com.example.app\r\nX-Request-ID: gone-before-answer-1\r\nContent-Length: 5\r\n\r\nhel")
            #expect(eventually(5) { relay.held == 1 }, "the challenge script is held")
        }
        let entry = try #require(gateway.accessLogEntry(requestID: "gone-before-answer-1"), "\(gateway.accessLogText())")
        #expect(entry["status"] as? Int == 499)
    }
}
