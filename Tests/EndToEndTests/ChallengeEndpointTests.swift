import AGTestSupport
import Foundation
import Testing

@Suite("challenge endpoint, end to end")
struct ChallengeEndpointTests {
    let teamID = TestGateway.randomTeamID()
    var appID: String { "\(teamID).com.example.app" }
    var tenantHeaders: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")] }

    func startGateway() throws -> TestGateway {
        try TestGateway(tenants: ["app.yaml": TestGateway.tenantYAML(teamID: teamID)])
    }

    @Test func issuesAChallengeStoredWithItsTTL() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let before = Date()
        let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: tenantHeaders)
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        let requestID = try #require(response.header("X-Request-ID"))
        #expect(UUID(uuidString: requestID) != nil)
        let challenge = try #require(response.json["challenge"] as? String)
        #expect(challenge.count == 64 && challenge.allSatisfy(\.isHexDigit))
        #expect(response.json["ttl"] as? Int == 300)
        let expiresAt = try #require((response.json["expiresAt"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(abs(expiresAt.timeIntervalSince(before) - 300) < 5)

        let key = "ag:{\(appID)}:ch:\(challenge)"
        let stored = try #require(Double(RedisCLI.run(gateway.redisURL, "GET", key)))
        #expect(abs(stored / 1000 - before.timeIntervalSince1970) < 5)
        let ttl = try #require(Int(RedisCLI.run(gateway.redisURL, "PTTL", key)))
        #expect(ttl > 590_000 && ttl <= 600_000, "kept twice the challenge ttl")
    }

    @Test func thousandChallengesAreDistinct() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let client = try HTTPTestClient(port: gateway.port)
        var seen = Set<String>()
        for _ in 0..<1000 {
            let response = try client.request("GET", "/api/v1/attestation/challenge", headers: tenantHeaders)
            #expect(response.status == 200)
            seen.insert(response.json["challenge"] as? String ?? "")
        }
        #expect(seen.count == 1000)
        #expect(try RedisCLI.run(gateway.redisURL, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "ag:{\(appID)}:ch:*") == "1000")
    }

    @Test(arguments: [
        ([("X-Bundle-ID", "com.example.app")], 400, "bad_request"),
        ([("X-Team-ID", "SOMETEAM01")], 400, "bad_request"),
        ([], 400, "bad_request"),
        ([("X-Team-ID", ""), ("X-Bundle-ID", "com.example.app")], 400, "bad_request"),
        ([("X-Team-ID", "UNKNOWN123"), ("X-Bundle-ID", "com.example.app")], 401, "unknown_tenant"),
        ([("X-Team-ID", "SOMETEAM01"), ("X-Bundle-ID", "com.other.app")], 401, "unknown_tenant"),
    ])
    func tenantResolutionErrors(headers: [(String, String)], status: Int, code: String) throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
        #expect(response.status == status)
        #expect(response.code == code)
        #expect(response.json["requestId"] as? String == response.header("X-Request-ID"))
        #expect(response.json["error"] is String)
        // RFC 9110 section 15.5.2: every 401 carries a challenge.
        #expect(response.header("WWW-Authenticate") == (status == 401 ? "AppAttest" : nil))
        #expect(try RedisCLI.run(gateway.redisURL, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "ag:{\(appID)}:*") == "0")
    }

    /// A tenant selector sent twice is refused: the gateway and an upstream that gets both
    /// copies could each take another one. Nothing is stored.
    @Test func aRepeatedTenantSelectorIsRefused() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        for headers in [[("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app"), ("X-Team-ID", teamID)],
                        [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app"), ("x-bundle-id", "com.other.app")]] {
            let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
            #expect(response.status == 400)
            #expect(response.code == "bad_request")
            #expect((response.json["error"] as? String)?.hasSuffix("is sent more than once") == true, "\(response.text)")
        }
        #expect(try RedisCLI.run(gateway.redisURL, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "ag:{\(appID)}:*") == "0")
        #expect(try gateway.send("GET", "/api/v1/attestation/challenge",
                                 headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")]).status == 200)
    }

    @Test func requestIDIsEchoedOnlyWhenSane() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let echoed = try gateway.send("GET", "/healthz", headers: [("X-Request-ID", "abc-123_x.y:z")])
        #expect(echoed.header("X-Request-ID") == "abc-123_x.y:z")
        for insane in ["has space", String(repeating: "a", count: 129), "semi;colon", "{\"json\":1}"] {
            let replaced = try gateway.send("GET", "/healthz", headers: [("X-Request-ID", insane)])
            let id = try #require(replaced.header("X-Request-ID"))
            #expect(id != insane)
            #expect(UUID(uuidString: id) != nil)
        }
    }

    @Test func methodPathAndProtocolErrors() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let post = try gateway.send("POST", "/api/v1/attestation/challenge", headers: tenantHeaders, body: [])
        #expect(post.status == 405)
        #expect(post.code == "method_not_allowed")
        #expect(post.header("Allow") == "GET")
        let missing = try gateway.send("GET", "/nowhere", headers: tenantHeaders)
        #expect(missing.status == 404)
        #expect(missing.code == "not_found")

        let raw = try HTTPTestClient(port: gateway.port)
        try raw.write("GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n")
        let malformed = try raw.readResponse()
        #expect(malformed.status == 400)
        #expect(malformed.code == "bad_request")

        let smuggle = try HTTPTestClient(port: gateway.port)
        try smuggle.write("POST /healthz HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        #expect(try smuggle.readResponse().status == 400)
    }

    @Test func healthAndReadiness() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let health = try gateway.send("GET", "/healthz")
        #expect(health.status == 200)
        #expect(health.json["status"] as? String == "ok")
        #expect(try eventually { try gateway.send("GET", "/readyz").status == 200 })
    }

    @Test func accessLogHasOneLinePerRequest() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: tenantHeaders + [("X-Request-ID", "log-probe-1")])
        let challenge = try #require(response.json["challenge"] as? String)
        #expect(eventually { gateway.accessLogText().contains("log-probe-1") })
        let lines = gateway.accessLogText().split(separator: "\n").filter { $0.contains("log-probe-1") }
        #expect(lines.count == 1)
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(entry["status"] as? Int == 200)
        #expect(entry["tenant"] as? String == appID)
        #expect(entry["route"] as? String == "challenge")
        #expect(!gateway.accessLogText().contains(challenge))
    }

    /// A body that never comes whole, on the gateway's own endpoints (attestation JSON, the
    /// Platform SSO form, the admin API): logged and counted as 499, like a proxied request
    /// whose client left (stop 36's sweep: neither the access log nor the metrics had it).
    @Test func aRequestWhoseBodyNeverCameIsLoggedAsAClientThatLeft() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let headers = tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        do {
            let socket = try RawTestSocket(port: gateway.port)
            socket.send("POST /api/v1/attestation/validate HTTP/1.1\r\nHost: x\r\n\(headers)X-Request-ID: cut-body-1\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"keyId\"")
            _ = socket.readToEnd(timeout: .milliseconds(200))
        }
        let entry = try #require(gateway.accessLogEntry(requestID: "cut-body-1"), "\(gateway.accessLogText())")
        #expect(entry["status"] as? Int == 499)
        #expect(entry["route"] as? String == "validate")
        let metrics = try gateway.admin("GET", "/metrics")
        #expect(String(decoding: metrics.body, as: UTF8.self).contains(#"route="validate",status="499""#))
    }
}
