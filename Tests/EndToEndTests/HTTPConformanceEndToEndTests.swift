import AGTestSupport
import Foundation
import Testing

/// The sweep of stop 31 (HTTP/1.1 server side), through the whole gateway: early refusals
/// reach a client that writes its whole body before reading (lingering close), an invalid
/// `Host` is refused instead of relayed as `X-Forwarded-Host`, an empty line before a request
/// line is skipped, an HTTP/1.0 client kept alive is told so, and answers carry `Date`. Each
/// failed before its fix.
@Suite("HTTP/1.1 conformance, end to end")
struct HTTPConformanceEndToEndTests {
    static let limitedServer = """
        server:
          listen: "127.0.0.1:0"
          workers: 1
          shutdown_grace: 2s
          max_proxy_body_bytes: 1MiB

        """

    @Test func earlyRefusalsReachAClientThatWritesItsWholeBodyFirst() throws {
        let fixture = try ProxyFixture(gatewayYAML: Self.limitedServer, workers: 1)
        defer { fixture.stop() }
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        for (path, size, status, code) in [("/public/up", 8 << 20, 413, "payload_too_large"),
                                           ("/api/up", 900 << 10, 401, "token_missing")] {
            let client = try RawTestSocket(port: fixture.gateway.port)
            // Written whole before anything is read, as Python's http.client and most SDKs do:
            // a reset under the upload used to fail this write.
            let head = "POST \(path) HTTP/1.1\r\nHost: gw\r\n\(headers)Content-Length: \(size)\r\n\r\n"
            #expect(client.sendAll(Array(head.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: size)), "\(path)")
            let (bytes, closed) = client.readUntilClose(timeout: .seconds(10))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 \(status) "), "\(path): \(text)")
            #expect(text.contains("\"code\":\"\(code)\""))
            #expect(text.contains("\r\nConnection: close\r\n"))
            #expect(closed)
        }
        #expect(fixture.upstream.records.isEmpty)
    }

    @Test func anInvalidHostIsRefusedAndAnEmptyOneSendsNoForwardedHost() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        for host in ["evil.example/x?y", "a b", "user@evil.example", "evil.example, good.example", "<script>", "h:99999x"] {
            let client = try HTTPTestClient(port: fixture.gateway.port)
            try client.write("GET /public/a HTTP/1.1\r\nHost: \(host)\r\n\(headers)\r\n")
            let response = try client.readResponse()
            #expect(response.status == 400, "\(host)")
            #expect(response.code == "bad_request")
            #expect(response.json["error"] as? String == "invalid Host header")
            #expect(response.header("X-Request-ID") == response.json["requestId"] as? String)
        }
        #expect(fixture.upstream.records.isEmpty, "nothing was proxied")
        let client = try HTTPTestClient(port: fixture.gateway.port)
        try client.write("GET /public/empty HTTP/1.1\r\nHost:\r\n\(headers)\r\n")
        #expect(try client.readResponse().status == 200)
        try client.write("GET /public/literal HTTP/1.1\r\nHost: [::1]:8080\r\n\(headers)\r\n")
        #expect(try client.readResponse().status == 200)
        let records = fixture.upstream.records
        #expect(records.count == 2)
        #expect(records.first?.headerValues("X-Forwarded-Host") == [], "an empty Host names no host")
        #expect(records.last?.header("X-Forwarded-Host") == "[::1]:8080")
    }

    @Test func emptyLinesHTTP10KeepAliveAndDate() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let headers = fixture.tenantHeaders.map { "\($0.0): \($0.1)\r\n" }.joined()
        let client = try HTTPTestClient(port: fixture.gateway.port)
        try client.write("\r\nGET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        let health = try client.readResponse()
        #expect(health.status == 200, "an empty line before the request line is skipped")
        #expect(IMFFixdate.isNow(health.header("Date")), "\(health.header("Date") ?? "none")")
        try client.write("GET /public/a HTTP/1.0\r\nConnection: keep-alive\r\n\(headers)\r\n")
        let proxied = try client.readResponse()
        #expect(proxied.status == 200)
        #expect(proxied.header("Connection") == "keep-alive")
        #expect(proxied.headerValues("Date").count == 1)
        #expect(IMFFixdate.isNow(proxied.header("Date")))
        try client.write("GET /api/a HTTP/1.0\r\nConnection: keep-alive\r\n\(headers)\r\n")
        let refused = try client.readResponse()
        #expect(refused.status == 401, "answered on the same connection")
        #expect(refused.header("Connection") == "keep-alive")
        #expect(IMFFixdate.isNow(refused.header("Date")))
    }
}
