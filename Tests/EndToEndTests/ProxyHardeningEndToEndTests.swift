import AGTestSupport
import Foundation
import Testing

/// Input the gateway refuses instead of guessing (issue 9 item 6), and its own refusals
/// carrying the contract's envelope (one local-reply renderer).
@Suite("proxy hardening, end to end")
struct ProxyHardeningEndToEndTests {
    @Test(arguments: ["/public/..;/api/x", "/public/%2e%2e;/api/x", "/public/.;/api/x", "/public/%252e%252e/api/x"])
    func dotSegmentsInDisguiseNeverReachAnAnonymousRoute(path: String) throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let response = try fixture.gateway.send("GET", path, headers: fixture.tenantHeaders)
        #expect(response.status == 400, "\(path): \(response.text)")
        #expect(response.code == "bad_request")
        #expect(fixture.upstream.records.isEmpty, "\(path) was proxied")
        #expect(try fixture.gateway.send("GET", "/public/ok;v=1", headers: fixture.tenantHeaders).status == 200,
                "a parameter on an ordinary segment still passes")
    }

    /// A tenant selector sent twice never reaches an upstream, which would get both copies.
    @Test func aRepeatedTenantSelectorIsNotProxied() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let response = try fixture.gateway.send("GET", "/public/x",
                                                headers: fixture.tenantHeaders + [("X-Team-ID", "OTHERTEAM1")])
        #expect(response.status == 400)
        #expect(response.code == "bad_request")
        #expect(response.json["error"] as? String == "X-Team-ID is sent more than once")
        #expect(fixture.upstream.records.isEmpty)
    }

    /// One tenant selector without the other selected nothing: the token named the tenant,
    /// and the lone `X-Team-ID` (another tenant's) reached the upstream beside that tenant's
    /// claims (stop 32, independent sweep). Refused like on the attestation routes.
    @Test(arguments: ["X-Team-ID", "X-Bundle-ID"])
    func aLoneTenantSelectorIsNotProxied(name: String) throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let (token, _) = try fixture.deviceToken()
        let lone = name == "X-Team-ID" ? ("X-Team-ID", "ZYXWV98765") : ("X-Bundle-ID", "com.other.app")
        let response = try fixture.get("/api/x", token: token, headers: [lone])
        #expect(response.status == 400, "\(response.text)")
        #expect(response.code == "bad_request")
        #expect((response.json["error"] as? String)?.hasPrefix("\(name) is sent without") == true, "\(response.text)")
        #expect(fixture.upstream.records.isEmpty)
        #expect(try fixture.get("/api/x", token: token, headers: []).status == 200, "neither: the token names the tenant")
        #expect(try fixture.get("/api/x", token: token).status == 200, "both")
    }

    @Test func refusedHeadsCarryTheEnvelopeRequestIDAndAnAccessLogLine() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let client = try HTTPTestClient(port: fixture.gateway.port)
        try client.write("GET /public/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(response.code == "bad_request")
        let requestID = try #require(response.json["requestId"] as? String)
        #expect(response.header("X-Request-ID") == requestID)
        #expect(response.json["error"] as? String == "more than one Host header")
        #expect(eventually { fixture.gateway.accessLogText().contains(requestID) })
        let line = try #require(fixture.gateway.accessLogText().split(separator: "\n").first { $0.contains(requestID) })
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(entry["status"] as? Int == 400)
        #expect(entry["code"] as? String == "bad_request")
        #expect(entry["route"] as? String == "local")
        #expect(fixture.upstream.records.isEmpty)
    }

    @Test func bareLFIsAnsweredAtOnceAndThePipelinedRequestIsNotProxied() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let client = try RawTestSocket(port: fixture.gateway.port)
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)" }.joined(separator: "\n")
        let started = ContinuousClock.now
        client.send("GET /public/a HTTP/1.1\nHost: h\n\(headers)\n\nGET /public/b HTTP/1.1\r\nHost: h\r\n\r\n")
        let (bytes, closed) = client.readUntilClose(timeout: .seconds(5))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(closed, "the connection is closed after the answer")
        #expect(ContinuousClock.now - started < .seconds(3), "answered at once, not at the read timeout")
        #expect(text.hasPrefix("HTTP/1.1 400 "), "\(text)")
        #expect(text.contains(#""code":"bad_request""#))
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: the pipelined request is not read")
        #expect(fixture.upstream.records.isEmpty)
    }

    /// A well-formed chunked request body — several chunks, an extension, a trailer — reaches
    /// the upstream whole and ended (re-chunked, the trailer dropped), and the connection goes
    /// on to the next request.
    @Test func chunkedBodyArrivesWholeAndEnded() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let client = try RawTestSocket(port: fixture.gateway.port)
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        client.send("POST /public/a HTTP/1.1\r\nHost: h\r\n\(headers)Transfer-Encoding: chunked\r\n\r\n"
                    + "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
                    + "GET /public/b HTTP/1.1\r\nHost: h\r\n\(headers)Connection: close\r\n\r\n")
        let (bytes, closed) = client.readUntilClose(timeout: .seconds(5))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(closed)
        #expect(text.components(separatedBy: "HTTP/1.1 200 ").count == 3, "\(text)")
        let records = fixture.upstream.records
        #expect(records.map(\.target) == ["/base/public/a", "/base/public/b"])
        let upload = try #require(records.first)
        #expect(upload.bodyComplete)
        #expect(upload.body == Array("hello 0123456789".utf8))
        #expect(upload.header("X-Trailer") == nil)
    }

    /// A chunked request body whose lines end in a bare LF is refused like a head that does
    /// (it was decoded and proxied before): a front proxy that reads the coding differently
    /// could otherwise smuggle a request past it. The body is streamed, so the upstream may
    /// have the head and the chunks before the bad line, never the body's end; the pipelined
    /// request after it is not read.
    @Test(arguments: ["5\nhello\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "5\r\nhello\r\n0\n\n"])
    func chunkedBodyWithABareLFIsRefused(body: String) throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let client = try RawTestSocket(port: fixture.gateway.port)
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        client.send("POST /public/a HTTP/1.1\r\nHost: h\r\n\(headers)Transfer-Encoding: chunked\r\n\r\n\(body)"
                    + "GET /public/b HTTP/1.1\r\nHost: h\r\n\(headers)\r\n")
        let (bytes, closed) = client.readUntilClose(timeout: .seconds(5))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(closed, "the connection is closed after the answer")
        #expect(text.hasPrefix("HTTP/1.1 400 "), "\(text)")
        #expect(text.contains(#""code":"bad_request""#), "\(text)")
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: the pipelined request is not read")
        let records = fixture.upstream.records
        #expect(records.count <= 1 && records.allSatisfy { $0.target == "/base/public/a" && !$0.bodyComplete },
                "\(records.map { ($0.target, $0.bodyComplete) })")
    }

    /// A request in absolute form (RFC 9112 section 3.2.2: a server must accept it) is
    /// routed by its path, forwarded in origin form, and its authority, not `Host`, becomes
    /// `X-Forwarded-Host`; the gateway's own endpoints answer it too. Before, it was refused
    /// as a path the proxy does not accept.
    @Test func absoluteFormRequestsAreRoutedByTheirPath() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let client = try HTTPTestClient(port: fixture.gateway.port)
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        try client.write("GET http://api.example.com/public/a?x=1 HTTP/1.1\r\nHost: other.example\r\n\(headers)\r\n")
        let proxied = try client.readResponse()
        #expect(proxied.status == 200, "\(proxied.text)")
        let record = try #require(fixture.upstream.records.last)
        #expect(record.target == "/base/public/a?x=1")
        #expect(record.header("X-Forwarded-Host") == "api.example.com")
        try client.write("GET HTTP://h.example:8080/healthz HTTP/1.1\r\nHost: h.example:8080\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        try client.write("GET http://u@h/public/a HTTP/1.1\r\nHost: h\r\n\(headers)\r\n")
        let refused = try client.readResponse()
        #expect(refused.status == 400)
        #expect(refused.code == "bad_request")
        #expect(fixture.upstream.records.count == 1)
    }
}
