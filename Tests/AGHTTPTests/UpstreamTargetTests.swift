import AGCrypto
import Testing
@testable import AGHTTP

@Suite struct UpstreamTargetTests {
    @Test(arguments: [
        ("http://127.0.0.1:8080", "127.0.0.1", 8080, ""),
        ("http://127.0.0.1:8080/", "127.0.0.1", 8080, ""),
        ("http://127.0.0.1:8080/api/v2/", "127.0.0.1", 8080, "/api/v2"),
        ("HTTP://localhost:9000/base", "localhost", 9000, "/base"),
        ("http://[::1]:8081/x", "::1", 8081, "/x"),
        ("http://10.0.0.7", "10.0.0.7", 80, ""),
        ("http://api.internal:8080/v1", "api.internal", 8080, "/v1"),
        ("http://my-svc.default.svc.cluster.local", "my-svc.default.svc.cluster.local", 80, ""),
    ])
    func parsesValidURLs(url: String, host: String, port: Int, basePath: String) throws {
        let target = try UpstreamTarget(url: url)
        #expect(target.host == host)
        #expect(target.port == port)
        #expect(target.basePath == basePath)
    }

    @Test(arguments: [
        ("https://127.0.0.1:8080", UpstreamTarget.ParseError.missingTLSContext),
        ("ftp://127.0.0.1:8080", .unsupportedScheme),
        ("127.0.0.1:8080", .unsupportedScheme),
        ("http://", .unsupportedScheme),
        ("http://:8080", .missingHost),
        ("http://api..example:8080", .unsupportedHost("api..example")),
        ("http://256.1.1.1:8080", .unsupportedHost("256.1.1.1")),
        ("http://bad!name:8080", .unsupportedHost("bad!name")),
        ("http://user@127.0.0.1:8080", .unsupportedHost("user@127.0.0.1:8080")),
        ("http://[::1:8080", .unsupportedHost("[::1:8080")),
        ("http://127.0.0.1:0", .invalidPort("0")),
        ("http://127.0.0.1:65536", .invalidPort("65536")),
        ("http://127.0.0.1:80a", .invalidPort("80a")),
        ("http://127.0.0.1:", .invalidPort("")),
        ("http://127.0.0.1:80/a?b", .invalidPath("/a?b")),
    ])
    func rejectsInvalidURLs(url: String, expected: UpstreamTarget.ParseError) {
        #expect(throws: expected) { try UpstreamTarget(url: url) }
    }

    @Test func hostHeaderAndPoolKey() throws {
        #expect(try UpstreamTarget(url: "http://[::1]:8081").hostHeader == "[::1]:8081")
        #expect(try UpstreamTarget(url: "http://127.0.0.1").hostHeader == "127.0.0.1")
        // localhost and 127.0.0.1 share pooled connections; a different port does not.
        #expect(try UpstreamTarget(url: "http://localhost:81/a").literalEndpoint == UpstreamTarget(url: "http://127.0.0.1:81/b").literalEndpoint)
        #expect(try UpstreamTarget(url: "http://127.0.0.1:81").literalEndpoint != UpstreamTarget(url: "http://127.0.0.1:82").literalEndpoint)
        // A name is resolved per request, not at load.
        #expect(try UpstreamTarget(url: "http://api.internal:81").literalEndpoint == nil)
    }

    @Test func httpsTargetsKeyTheirPoolByNameAndRoots() throws {
        let system = try TLSClientContext()
        let https = try UpstreamTarget(url: "https://API.internal/v1", tls: system)
        #expect(https.isTLS)
        #expect(https.port == 443)
        #expect(https.hostHeader == "API.internal", "443 is https's default port")
        #expect(https.tlsPeer == TLSPeer(serverName: "api.internal", trust: "system"))
        #expect(https.description == "https://API.internal/v1")
        let literal = try UpstreamTarget(url: "https://127.0.0.1:8443", tls: system)
        let plain = try UpstreamTarget(url: "http://127.0.0.1:8443")
        #expect(literal.literalEndpoint != plain.literalEndpoint, "a TLS connection never serves a plain target")
        #expect(literal.literalEndpoint?.tls?.serverName == "127.0.0.1")
        #expect(try UpstreamTarget(url: "http://h:443", tls: system).isTLS == false, "http:// ignores a context")
    }
}

@Suite struct UpstreamRequestHeadTests {
    @Test func keepsOrderAndDuplicatesAndOwnsFraming() {
        let headers = HTTPHeaders([("Host", "api.test"), ("X-B", "2"), ("x-a", "1"), ("X-B", "3"),
                                   ("Content-Length", "99"), ("Connection", "close"), ("Expect", "100-continue"),
                                   ("Transfer-Encoding", "chunked")])
        let head = UpstreamRequestHead.render(method: "POST", path: "/base/p?q=1", headers: headers,
                                              framing: .length(5), defaultHost: "127.0.0.1:81")
        #expect(head == "POST /base/p?q=1 HTTP/1.1\r\nHost: api.test\r\nX-B: 2\r\nx-a: 1\r\nX-B: 3\r\nContent-Length: 5\r\n\r\n")
    }

    @Test func addsHostAndFramingWhenNeeded() {
        #expect(UpstreamRequestHead.render(method: "GET", path: "/", headers: HTTPHeaders(), framing: .none, defaultHost: "h:1")
                == "GET / HTTP/1.1\r\nHost: h:1\r\n\r\n")
        #expect(UpstreamRequestHead.render(method: "PUT", path: "/", headers: HTTPHeaders([("host", "x")]), framing: .none, defaultHost: "h:1")
                == "PUT / HTTP/1.1\r\nhost: x\r\nContent-Length: 0\r\n\r\n")
        #expect(UpstreamRequestHead.render(method: "POST", path: "/", headers: HTTPHeaders([("Host", "x")]), framing: .chunked, defaultHost: "h:1")
                == "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    }
}
