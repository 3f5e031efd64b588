import AGFormats
import AGHTTP
import Testing

@testable import AGConfig
@testable import AGPolicy
@testable import AGGateway

/// The pure header logic of the proxy: what reaches the upstream, what reaches the client.
@Suite struct ProxyHeaderTests {
    static let policy = ForwardHeaderPolicy(
        forward: ForwardConfig(claims: ForwardConfig.defaultClaims + [ClaimHeader(claimPath: ["custom_claims", "plan"], header: "X-Plan")],
                               payloadHeader: "X-Attest-Claims", forwardAuthorization: false),
        tokenHeader: "Authorization", upstreamHost: "127.0.0.1:9000")
    static let hop = ClientHop(peerAddress: "203.0.113.7", peerTrusted: false, requestID: "req-1")
    static let injected: [(name: String, value: String)] = [("X-Attest-Key-Id", "real-key"), ("X-Plan", "gold")]

    struct SpoofCase: Sendable, CustomTestStringConvertible {
        let name: String
        var testDescription: String { name }
    }

    @Test(arguments: [
        "X-Attest-Key-Id", "x-attest-key-id", "X_Attest_Key_Id", "x_attest_key_id", "X-ATTEST-TEAM-ID", "X-Attest-Subject-Id",
        "X-Attest-Claims", "X_Attest_Claims", "X-Attest-Anything", "x-attest-", "X-Plan", "x_plan", "X_PLAN",
        "X_Team_ID", "x_bundle_id", "X-Team_Id",
    ])
    func spoofedHeadersNeverReachTheUpstream(name: String) {
        let inbound = HTTPHeaders([(name, "forged"), (name, "forged-again"), ("Accept", "*/*")])
        for injected in [Self.injected, []] {
            let out = ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: injected)
            #expect(!out.fields.contains { $0.value.hasPrefix("forged") }, "\(name) survived")
            #expect(out["Accept"] == "*/*")
            for field in injected { #expect(out.values(field.name) == [field.value], "injected values replace, never append") }
        }
    }

    @Test func headersThatMerelyResembleClaimHeadersPass() {
        let inbound = HTTPHeaders([("X-Attested", "1"), ("X-Attest", "2"), ("X-Planet", "3"), ("Attest-Key-Id", "4"),
                                   ("X-Team-ID", "5"), ("X-Bundle-ID", "6"), ("X_Team_IDs", "7")])
        let out = ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: [])
        for field in inbound.fields { #expect(out[field.name] == field.value) }
    }

    @Test func authorizationIsWithheldUnlessForwarded() {
        let inbound = HTTPHeaders([("Authorization", "Bearer abc"), ("X-Other", "1")])
        #expect(ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: [])["Authorization"] == nil)
        let forwarding = ForwardHeaderPolicy(forward: ForwardConfig(claims: [], payloadHeader: nil, forwardAuthorization: true),
                                             tokenHeader: "Authorization", upstreamHost: "u")
        #expect(ForwardHeaders.request(inbound, policy: forwarding, hop: Self.hop, injected: [])["Authorization"] == "Bearer abc")
        let customHeader = ForwardHeaderPolicy(forward: ForwardConfig(claims: [], payloadHeader: nil, forwardAuthorization: false),
                                               tokenHeader: "X-App-Token", upstreamHost: "u")
        let custom = ForwardHeaders.request(HTTPHeaders([("Authorization", "Basic dTpw"), ("X-App-Token", "t"), ("x_app_token", "t2")]),
                                            policy: customHeader, hop: Self.hop, injected: [])
        #expect(custom["X-App-Token"] == nil)
        #expect(custom["x_app_token"] == nil)
        #expect(custom["Authorization"] == "Basic dTpw", "with another token header, Authorization is the client's business")
    }

    /// A field the gateway acts on spelt with `_` for `-` never passes: upstreams that read `_`
    /// as `-` (CGI-style environments; Puma before 6.4.3 framed a body by `Transfer_Encoding`,
    /// CVE-2024-45614) would see a second framing or hop-by-hop field beside the gateway's own
    /// (the framing sweep of stop 35 found these forwarded). Unknown `_` names still pass.
    @Test func underscoreSpellingsOfTheFieldsTheGatewayWritesAreRemoved() {
        let inbound = HTTPHeaders([
            ("Transfer_Encoding", "chunked"), ("content_length", "30"), ("Keep_Alive", "timeout=5"),
            ("Proxy_Connection", "keep-alive"), ("PROXY_AUTHORIZATION", "Basic x"), ("Proxy_Authenticate", "Basic"),
            ("Content_Type", "text/evil"), ("Content-Type", "text/plain"), ("X_Custom_Name", "kept"), ("Proxy_X", "kept"),
        ])
        let out = ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: [])
        let names = Set(out.fields.map { $0.name.lowercased() })
        for removed in ["transfer_encoding", "content_length", "keep_alive", "proxy_connection", "proxy_authorization",
                        "proxy_authenticate", "content_type"] {
            #expect(!names.contains(removed), "\(removed)")
        }
        #expect(out.values("Content-Type") == ["text/plain"])
        #expect(out["X_Custom_Name"] == "kept")
        #expect(out["Proxy_X"] == "kept")
    }

    @Test func hopByHopHeadersAreRemoved() {
        let inbound = HTTPHeaders([
            ("Connection", "keep-alive, X-Private, Upgrade"), ("Keep-Alive", "timeout=5"), ("X-Private", "secret"),
            ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("Trailer", "X-Sum"), ("Upgrade", "websocket"),
            ("Transfer-Encoding", "chunked"), ("Proxy-Authorization", "Basic x"), ("Content-Type", "text/plain"),
            // `Proxy` (httpoxy: a CGI upstream's HTTP_PROXY) and any `Proxy-*`, as the README says.
            ("Proxy", "http://evil.example:3128"), ("PROXY-Foo", "bar"), ("Proxyish", "kept"), ("Proxy_X", "kept"),
        ])
        let out = ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: [])
        let names = Set(out.fields.map { $0.name.lowercased() })
        for removed in ["connection", "keep-alive", "x-private", "proxy-connection", "te", "trailer", "upgrade",
                        "transfer-encoding", "proxy-authorization", "proxy", "proxy-foo"] {
            #expect(!names.contains(removed), "\(removed)")
        }
        #expect(out["Content-Type"] == "text/plain")
        #expect(out["Proxyish"] == "kept")
        #expect(out["Proxy_X"] == "kept")
    }

    struct ForwardedCase: Sendable, CustomTestStringConvertible {
        let name: String
        let trusted: Bool
        let inbound: [(String, String)]
        let forwardedFor: String
        let proto: String
        let host: String?
        var testDescription: String { name }
    }

    @Test(arguments: [
        ForwardedCase(name: "untrusted peer, nothing sent", trusted: false, inbound: [("Host", "api.example.com")],
                      forwardedFor: "203.0.113.7", proto: "http", host: "api.example.com"),
        ForwardedCase(name: "untrusted peer's chain is replaced", trusted: false,
                      inbound: [("Host", "h"), ("X-Forwarded-For", "1.1.1.1"), ("X_Forwarded_For", "2.2.2.2"),
                                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "evil")],
                      forwardedFor: "203.0.113.7", proto: "http", host: "h"),
        ForwardedCase(name: "trusted peer's chain is extended", trusted: true,
                      inbound: [("Host", "h"), ("X-Forwarded-For", "1.1.1.1, 10.0.0.1"), ("X-Forwarded-For", "10.0.0.2"),
                                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "api.example.com")],
                      forwardedFor: "1.1.1.1, 10.0.0.1, 10.0.0.2, 203.0.113.7", proto: "https", host: "api.example.com"),
        ForwardedCase(name: "trusted peer without a chain", trusted: true, inbound: [("Host", "h")],
                      forwardedFor: "203.0.113.7", proto: "http", host: "h"),
        ForwardedCase(name: "no Host", trusted: false, inbound: [], forwardedFor: "203.0.113.7", proto: "http", host: nil),
    ])
    func forwardingHeaders(_ row: ForwardedCase) {
        let hop = ClientHop(peerAddress: "203.0.113.7", peerTrusted: row.trusted, requestID: "req-9")
        let out = ForwardHeaders.request(HTTPHeaders(row.inbound.map { (name: $0.0, value: $0.1) }), policy: Self.policy, hop: hop,
                                         injected: [])
        #expect(out.values("X-Forwarded-For") == [row.forwardedFor])
        #expect(out.values("X-Forwarded-Proto") == [row.proto])
        #expect(out.values("X-Forwarded-Host") == (row.host.map { [$0] } ?? []))
        #expect(out.values("Host") == ["127.0.0.1:9000"])
        #expect(out.values("X-Request-ID") == ["req-9"])
        #expect(out["X_Forwarded_For"] == nil)
    }

    @Test func forwardedIsKeptOnlyFromTrustedPeers() {
        let inbound = HTTPHeaders([("Forwarded", "for=1.2.3.4"), ("X-Request-ID", "client-id")])
        let untrusted = ForwardHeaders.request(inbound, policy: Self.policy, hop: Self.hop, injected: [])
        #expect(untrusted["Forwarded"] == nil)
        #expect(untrusted.values("X-Request-ID") == ["req-1"])
        let trusted = ForwardHeaders.request(inbound, policy: Self.policy,
                                             hop: ClientHop(peerAddress: "10.0.0.1", peerTrusted: true, requestID: "r"), injected: [])
        #expect(trusted["Forwarded"] == "for=1.2.3.4")
    }

    /// The `api` decision's headers, written as digits into the proxied answer, replace the
    /// upstream's own in any case, keep other `X-RateLimit-*` names, and read exactly as the
    /// gateway's own answers spell them (`RateLimitOutcome.headers`).
    @Test func rateLimitDecisionReplacesTheUpstreamsHeaders() {
        let decision = TokenBucket.Decision(allowed: true, limit: 600, remaining: 0, resetAt: 1_796_166_932, retryAfter: 0)
        var headers = HTTPHeaders([
            ("x-ratelimit-limit", "5"), ("X-RATELIMIT-REMAINING", "4"), ("X-RateLimit-Reset", "9"),
            ("X-RateLimit-Policy", "kept"), ("X-Custom", "kept"),
        ])
        ForwardHeaders.filterResponse(&headers, requestID: "req-1", extra: HTTPHeaders(), rateLimit: decision)
        #expect(headers.values("X-RateLimit-Limit") == ["600"])
        #expect(headers.values("X-RateLimit-Remaining") == ["0"])
        #expect(headers.values("X-RateLimit-Reset") == ["1796166932"])
        #expect(headers["X-RateLimit-Policy"] == "kept")
        #expect(headers["X-Custom"] == "kept")
        let written = headers.fields.filter { ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"].contains($0.name) }
        #expect(written.map { [$0.name, $0.value] } == RateLimitOutcome.headers(decision).map { [$0.0, $0.1] })
        // Without a decision the upstream's own pass through.
        var untouched = HTTPHeaders([("X-RateLimit-Limit", "5")])
        ForwardHeaders.filterResponse(&untouched, requestID: "req-1", extra: HTTPHeaders())
        #expect(untouched.values("X-RateLimit-Limit") == ["5"])
    }

    /// `Connection: keep-alive` (every keep-alive upstream's) lists no field worth a list of
    /// its own: `Keep-Alive` goes as hop-by-hop, and any other field named beside it still goes.
    @Test func keepAliveConnectionOptionStillDropsWhatItNames() {
        var plain = HTTPHeaders([("Connection", "Keep-Alive"), ("Keep-Alive", "timeout=5"), ("X-Custom", "kept")])
        ForwardHeaders.filterResponse(&plain, requestID: "req-1", extra: HTTPHeaders())
        #expect(plain["Keep-Alive"] == nil)
        #expect(plain["Connection"] == nil)
        #expect(plain["X-Custom"] == "kept")
        var listed = HTTPHeaders([("Connection", "keep-alive, X-Secret"), ("X-Secret", "s"), ("X-Custom", "kept")])
        ForwardHeaders.filterResponse(&listed, requestID: "req-1", extra: HTTPHeaders())
        #expect(listed["X-Secret"] == nil)
        #expect(listed["X-Custom"] == "kept")
    }

    @Test func responseFilter() {
        var headers = HTTPHeaders([
            ("Connection", "X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"), ("Upgrade", "h2c"), ("Trailer", "X-Sum"),
            ("Proxy-Authenticate", "Basic"), ("X-Request-ID", "upstream-id"), ("X-Custom", "kept"), ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"), ("X-RateLimit-Limit", "upstream"), ("Proxy-Status", "inner"), ("proxy", "x"),
        ])
        ForwardHeaders.filterResponse(&headers, requestID: "req-1", extra: HTTPHeaders([("X-RateLimit-Limit", "600")]))
        #expect(headers["X-Hop"] == nil)
        #expect(headers["Keep-Alive"] == nil)
        #expect(headers["Upgrade"] == nil)
        #expect(headers["Trailer"] == nil)
        #expect(headers["Proxy-Authenticate"] == nil)
        #expect(headers["Proxy-Status"] == nil)
        #expect(headers["Proxy"] == nil)
        #expect(headers.values("X-Request-ID") == ["req-1"])
        #expect(headers["X-Custom"] == "kept")
        #expect(headers.values("Set-Cookie") == ["a=1", "b=2"])
        #expect(headers.values("X-RateLimit-Limit") == ["600"])
    }

    struct ClaimCase: Sendable, CustomTestStringConvertible {
        let name: String
        let value: JSONValue?
        let expected: String?
        var testDescription: String { name }
    }

    @Test(arguments: [
        ClaimCase(name: "string", value: "gold", expected: "gold"),
        ClaimCase(name: "integer", value: 42, expected: "42"),
        ClaimCase(name: "bool", value: true, expected: "true"),
        ClaimCase(name: "object", value: ["tier": "pro", "active": true], expected: #"{"active":true,"tier":"pro"}"#),
        ClaimCase(name: "array", value: [1, 2], expected: "[1,2]"),
        ClaimCase(name: "null", value: .null, expected: nil),
        ClaimCase(name: "missing", value: nil, expected: nil),
        ClaimCase(name: "CRLF injection", value: "gold\r\nX-Attest-Key-Id: forged", expected: nil),
        ClaimCase(name: "NUL", value: "a\u{0}b", expected: nil),
        ClaimCase(name: "tab is fine", value: "a\tb", expected: "a\tb"),
        ClaimCase(name: "UTF-8", value: "Zoë", expected: "Zoë"),
    ])
    func claimValues(_ row: ClaimCase) {
        var custom: [String: JSONValue] = [:]
        if let value = row.value { custom["plan"] = value }
        let payload: [String: JSONValue] = ["sub": "key", "custom_claims": .object(custom)]
        let mapper = ClaimHeaderMapper(claims: [ClaimHeader(claimPath: ["custom_claims", "plan"], header: "X-Plan")])
        let fields = mapper.headers(for: payload)
        #expect(fields.map(\.value) == (row.expected.map { [$0] } ?? []))
    }

    @Test func defaultClaimMap() {
        let payload: [String: JSONValue] = ["sub": "a2V5", "team_id": "TEAM123456", "bundle_id": "com.example.app", "aud": "x"]
        let fields = ClaimHeaderMapper(claims: ForwardConfig.defaultClaims).headers(for: payload)
        #expect(fields.map(\.name) == ["X-Attest-Key-Id", "X-Attest-Team-Id", "X-Attest-Bundle-Id"])
        #expect(fields.map(\.value) == ["a2V5", "TEAM123456", "com.example.app"])
    }

    @Test func headerNameNormalization() {
        #expect(HeaderName.hasAttestPrefix("X_ATTEST_foo"))
        #expect(HeaderName.hasAttestPrefix("x-attest-"))
        #expect(!HeaderName.hasAttestPrefix("x-attest"))
        #expect(!HeaderName.hasAttestPrefix("x-attested"))
        #expect(HeaderName.matches("X_Forwarded_For", HeaderName.normalized("x-forwarded-for")))
        #expect(!HeaderName.matches("X-Forwarded-Fo", HeaderName.normalized("x-forwarded-for")))
    }
}

/// The tables above speak in string pairs; these run them through the byte path: the pairs
/// are rendered and parsed as a real head would be, and what the gateway writes is parsed back.
extension ForwardHeaders {
    static func parsedFields(_ headers: HTTPHeaders) -> HTTPFields {
        let text = headers.fields.map { "\($0.name): \($0.value)\r\n" }.joined() + "\r\n"
        return try! HTTPFields(parsing: Array(text.utf8))
    }

    static func request(_ inbound: HTTPHeaders, policy: ForwardHeaderPolicy, hop: ClientHop,
                        injected: [(name: String, value: String)]) -> HTTPFields {
        var writer = HTTPHeadWriter()
        request(parsedFields(inbound), policy: policy, hop: hop, injected: InjectedHeaders(injected), into: &writer)
        return try! HTTPFields(parsing: writer.bytes + Array("\r\n".utf8))
    }

    static func filterResponse(_ headers: inout HTTPHeaders, requestID: RequestIdentifier, extra: HTTPHeaders,
                               rateLimit: TokenBucket.Decision? = nil) {
        let text = "HTTP/1.1 200 OK\r\n" + headers.fields.map { "\($0.name): \($0.value)\r\n" }.joined() + "\r\n"
        let head = try! HTTPHeadParser.parseResponse(Array(text.utf8))
        var writer = HTTPHeadWriter()
        response(head, requestID: requestID, extra: extra, rateLimit: rateLimit, into: &writer)
        headers = HTTPHeaders(try! HTTPFields(parsing: writer.bytes + Array("\r\n".utf8)).fields)
    }
}
