import AGTestSupport
import AGHTTP
import AGDevice
import Foundation
import Synchronization
import Testing

/// Echoes the request so tests can see what the client sent.
private func echo(_ request: TestRequest) -> TestReply {
    let summary = "\(request.method) \(request.path) host=\(request.header("Host") ?? "-") "
        + "length=\(request.header("Content-Length") ?? "-") body=\(String(decoding: request.body, as: UTF8.self))"
    return .response(status: 200, headers: [("X-Echo", "1")], body: Array(summary.utf8))
}

@Test("a Content-Length response is read whole; Host, Content-Length and headers are sent")
func contentLength() throws {
    let server = try TestHTTPServer(handler: echo)
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    let response = try client.request(method: "POST", path: "/echo?x=1", headers: [("X-Custom", "v")],
                                      body: Array("{\"a\":1}".utf8))
    #expect(response.status == 200)
    #expect(response.header("x-echo") == "1")
    #expect(response.text == "POST /echo?x=1 host=127.0.0.1:\(server.port) length=7 body={\"a\":1}")

    // A body-less POST still says Content-Length: 0 (servers may otherwise wait for a body).
    #expect(try client.request(method: "POST", path: "/e").text == "POST /e host=127.0.0.1:\(server.port) length=0 body=")
    #expect(try client.request(path: "/g").text == "GET /g host=127.0.0.1:\(server.port) length=- body=")
}

@Test("chunked responses are reassembled, extensions and trailers skipped")
func chunked() throws {
    let server = try TestHTTPServer { _ in .chunked(["hello, ", "chunked ", "world"]) }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    let response = try client.request(path: "/")
    #expect(response.status == 200)
    #expect(response.text == "hello, chunked world")
    #expect(response.header("Content-Length") == nil)
}

@Test("a multi-chunk body larger than one read arrives intact, twice on one connection")
func chunkedLarge() throws {
    let big = String(repeating: "abcdefghij", count: 5_000)
    let server = try TestHTTPServer { _ in .chunked(["start-", big, "-end"]) }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    for _ in 0..<2 {
        #expect(try client.request(path: "/").text == "start-" + big + "-end")
    }
    #expect(client.connectionsOpened == 1)
    #expect(server.connectionsAccepted == 1)
}

@Test("keep-alive: sequential requests reuse one connection")
func keepAliveReuse() throws {
    let server = try TestHTTPServer(handler: echo)
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    for index in 0..<5 {
        #expect(try client.request(path: "/\(index)").status == 200)
    }
    #expect(client.connectionsOpened == 1)
    #expect(server.connectionsAccepted == 1)
    #expect(server.requestsServed == 5)
}

@Test("Connection: close and close-delimited bodies end the connection; the next request reconnects")
func connectionClose() throws {
    let count = Atomic<Int>(0)
    let server = try TestHTTPServer { _ in
        if count.add(1, ordering: .sequentiallyConsistent).newValue == 1 {
            return .response(status: 200, body: Array("first".utf8), closing: true)
        }
        // No framing at all: the body runs until the server closes.
        return .rawThenClose(Array("HTTP/1.1 201 Created\r\nX-A: b\r\n\r\nuntil close".utf8))
    }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    #expect(try client.request(path: "/").text == "first")
    let second = try client.request(path: "/")
    #expect(second.status == 201)
    #expect(second.text == "until close")
    #expect(client.connectionsOpened == 2)
}

@Test("a kept-alive connection the server dropped is replaced without failing the request")
func staleConnectionRetried() throws {
    let count = Atomic<Int>(0)
    let server = try TestHTTPServer { request in
        // The second request on the first connection is dropped unanswered, as a server
        // closing an idle connection at the wrong moment would.
        let number = count.add(1, ordering: .sequentiallyConsistent).newValue
        return number == 2 ? .close : echo(request)
    }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    #expect(try client.request(path: "/one").status == 200)
    #expect(try client.request(path: "/two").text.hasPrefix("GET /two"))
    #expect(client.connectionsOpened == 2)
}

@Test("a POST whose kept-alive connection closes after it was written is not sent again")
func staleConnectionPostNotRetried() throws {
    let count = Atomic<Int>(0)
    let server = try TestHTTPServer { request in
        count.add(1, ordering: .sequentiallyConsistent).newValue == 2 ? .close : echo(request)
    }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    #expect(try client.request(method: "POST", path: "/one").status == 200)
    #expect(throws: HTTPClientError.connectionClosed) { try client.request(method: "POST", path: "/two") }
    #expect(server.requestsServed == 2)
    // The client recovers on the next request.
    #expect(try client.request(method: "POST", path: "/three").status == 200)
}

@Test("a fresh connection closed without a response is an error, not a retry loop")
func closedWithoutResponse() throws {
    let server = try TestHTTPServer { _ in .close }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url)
    #expect(throws: HTTPClientError.connectionClosed) { try client.request(path: "/") }
    #expect(server.requestsServed == 1)
}

@Test("a server that never answers times out after the configured limit")
func timeout() throws {
    let server = try TestHTTPServer { _ in .silence }
    defer { server.stop() }
    let client = try BlockingHTTPClient(url: server.url, timeout: .milliseconds(300))
    let started = ContinuousClock.now
    #expect(throws: HTTPClientError.timedOut(phase: "response")) { try client.request(path: "/") }
    let waited = started.duration(to: .now)
    #expect(waited >= .milliseconds(290))
    #expect(waited < .seconds(3))
}

@Test("connecting to a port nobody listens on reports connection refused")
func connectionRefused() throws {
    let refusing = RefusingPort()
    let port = refusing.port
    let client = try BlockingHTTPClient(url: "http://localhost:\(port)")
    #expect(throws: HTTPClientError.connectionRefused(address: "127.0.0.1:\(port)")) { try client.request(path: "/") }
    withExtendedLifetime(refusing) {}
}

@Test("malformed responses and oversized bodies are refused")
func malformedResponses() throws {
    let replies: [String: TestReply] = [
        "/status": .rawThenClose(Array("HTTP/2 200 OK\r\n\r\n".utf8)),
        "/length": .raw(Array("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n".utf8)),
        "/lengths": .raw(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab".utf8)),
        "/chunk": .raw(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8)),
        "/fold": .raw(Array("HTTP/1.1 200 OK\r\n folded: x\r\nContent-Length: 0\r\n\r\n".utf8)),
        "/big": .response(status: 200, body: [UInt8](repeating: 1, count: 2_000)),
    ]
    let server = try TestHTTPServer { replies[$0.path] ?? .close }
    defer { server.stop() }
    for path in ["/status", "/length", "/lengths", "/chunk", "/fold"] {
        let client = try BlockingHTTPClient(url: server.url)
        #expect(throws: HTTPClientError.self, "\(path)") { try client.request(path: path) }
        do {
            _ = try client.request(path: path)
        } catch {
            guard case .malformedResponse = error else {
                Issue.record("\(path): \(error)")
                continue
            }
        }
    }
    let small = BlockingHTTPClient(endpoint: try HTTPEndpoint(url: server.url), maximumResponseBytes: 1_000)
    #expect(throws: HTTPClientError.responseTooLarge(limit: 1_000)) { try small.request(path: "/big") }
}

@Test("requests that would corrupt the stream are refused before sending")
func invalidRequests() throws {
    let client = try BlockingHTTPClient(url: "http://127.0.0.1:1")
    let cases: [(String, String, [(name: String, value: String)])] = [
        ("GET", "no-slash", []),
        ("GET", "/a b", []),
        ("GE T", "/", []),
        ("GET", "/", [("X-Bad", "a\r\nInjected: yes")]),
        ("GET", "/", [("Bad Name", "v")]),
        ("POST", "/", [("Content-Length", "5")]),
        ("POST", "/", [("Transfer-Encoding", "chunked")]),
    ]
    for (method, path, headers) in cases {
        #expect(throws: HTTPClientError.self) { try client.request(method: method, path: path, headers: headers) }
        do {
            _ = try client.request(method: method, path: path, headers: headers)
        } catch {
            guard case .invalidRequest = error else {
                Issue.record("\(method) \(path) \(headers): \(error)")
                continue
            }
        }
    }
}

@Test("only http://IPv4[:port] and localhost URLs are accepted")
func endpoints() throws {
    let accepted: [(String, String, UInt16, String)] = [
        ("http://127.0.0.1:8080", "127.0.0.1", 8080, "127.0.0.1:8080"),
        ("http://localhost:9901/", "127.0.0.1", 9901, "localhost:9901"),
        ("http://10.1.2.3", "10.1.2.3", 80, "10.1.2.3"),
    ]
    for (url, ipv4, port, host) in accepted {
        let endpoint = try HTTPEndpoint(url: url)
        #expect(endpoint.ipv4 == ipv4)
        #expect(endpoint.port == port)
        #expect(endpoint.hostHeader == host)
    }
    for url in ["https://127.0.0.1", "http://example.com", "http://127.0.0.1:0", "http://127.0.0.1:99999",
                "http://127.0.0.1/base", "http://user@127.0.0.1", "http://256.1.1.1", "http://1.2.3", "127.0.0.1:80",
                "http://[::1]:80", "http://"] {
        #expect(throws: HTTPClientError.invalidURL(url), "\(url)") { try HTTPEndpoint(url: url) }
    }
}
