@testable import AGHTTP
import Testing

/// The request/response head parser: what it accepts, and every smuggling-prone shape it refuses.
@Suite("HTTP head parser")
struct HTTPHeadParserTests {
    func request(_ text: String) throws(HTTPParseError) -> HTTPRequestHead {
        try HTTPHeadParser.parseRequest(Array(text.utf8))
    }

    func response(_ text: String) throws(HTTPParseError) -> HTTPResponseHead {
        try HTTPHeadParser.parseResponse(Array(text.utf8))
    }

    @Test func parsesARequestKeepingOrderDuplicatesAndTrimming() throws {
        let head = try request("POST /a/b?x=1&y=%20 HTTP/1.1\r\nHost: h\r\nX-Dup: 1\r\nx-dup:  2 \r\nEmpty:\r\n\r\n")
        #expect(head.method == "POST")
        #expect(head.target == "/a/b?x=1&y=%20")
        #expect(head.path == "/a/b")
        #expect(head.query == "x=1&y=%20")
        #expect(head.versionMinor == 1)
        #expect(head.headers.fields.map(\.name) == ["Host", "X-Dup", "x-dup", "Empty"])
        #expect(head.headers.values("X-DUP") == ["1", "2"])
        #expect(head.headers["empty"] == "")
    }

    /// The method is kept exactly as sent: `GET` and `POST` come from literals, their near
    /// misses (case, length, one byte off) and every other token are decoded.
    @Test func methodsKeepTheirExactSpelling() throws {
        for method in ["GET", "POST", "get", "Get", "GEX", "GETS", "GE", "POS", "POSt", "POSX", "PUT", "PATCH", "DELETE", "X"] {
            #expect(try request("\(method) / HTTP/1.1\r\nHost: h\r\n\r\n").method == method)
        }
    }

    /// Case-insensitive comparison of a field's bytes with bytes and with text: equal in any
    /// case, unequal by one byte or by length, and empty against empty (an empty field value
    /// over an empty list element must not reach for a buffer that is not there).
    @Test func fieldBytesCompareIgnoringCase() throws {
        let head = try request("GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\nEmpty:\r\n\r\n")
        let fields = head.headers
        let connection = try #require(fields.first { $0.name == .connection })
        var options: [Range<Int>] = []
        fields.forEachListElement(of: connection) { options.append($0) }
        #expect(options.count == 2)
        #expect(fields.equalsIgnoringCase(options[0], Array("keep-alive".utf8)))
        #expect(fields.equalsIgnoringCase(options[0], "KEEP-ALIVE"))
        #expect(!fields.equalsIgnoringCase(options[0], Array("keep-alivf".utf8)))
        #expect(!fields.equalsIgnoringCase(options[1], Array("clos".utf8)))
        #expect(fields.equalsIgnoringCase(options[1], "close"))
        let empty = try #require(fields.first { $0.nameRange.count == 5 && fields.equalsIgnoringCase($0.nameRange, "empty") })
        #expect(fields.equalsIgnoringCase(empty.valueRange, [UInt8]()))
        #expect(fields.equalsIgnoringCase(empty.valueRange, ""))
        #expect(HTTPFields().equalsIgnoringCase(0..<0, [UInt8]()))
        #expect(!HTTPFields().equalsIgnoringCase(0..<1, Array("a".utf8)))
    }

    /// The constant form (`StaticString`, lower case) compares eight bytes at a time, lowered
    /// as a word, then the tail byte by byte: equal in any case, unequal by one byte in either
    /// part, by length, or by a byte that differs from a letter only in bit 5 ("@" against
    /// "`", "[" against "{") or only in its high bit (obs-text is not lowered).
    @Test func fieldBytesCompareWithLowerCaseConstants() throws {
        func compare(_ value: [UInt8], _ constant: StaticString) throws -> Bool {
            let head = try HTTPHeadParser.parseRequest(Array("GET / HTTP/1.1\r\nHost: h\r\nX: ".utf8) + value + Array("\r\n\r\n".utf8))
            let field = try #require(head.headers.first { $0.nameRange.count == 1 })
            return head.headers.equalsIgnoringCase(field.valueRange, constant)
        }
        let rows: [(value: String, constant: StaticString, equal: Bool)] = [
            ("keep-alive", "keep-alive", true), ("Keep-Alive", "keep-alive", true), ("KEEP-ALIVE", "keep-alive", true),
            ("keep-alivf", "keep-alive", false), ("keeq-alive", "keep-alive", false), ("kEEP-ALIV", "keep-alive", false),
            ("keep-alive!", "keep-alive", false), ("@EEP-ALIVE", "`eep-alive", false), ("`EEP-ALIVE", "`eep-alive", true),
            ("[EEP-ALIVE", "{eep-alive", false),
            ("X-Forwarded-Host", "x-forwarded-host", true), ("X-Forwarded-Hosu", "x-forwarded-host", false),
            ("BEARER1", "bearer1", true), ("Bearer!", "bearer1", false), ("", "", true), ("a", "", false),
        ]
        for row in rows {
            #expect(try compare(Array(row.value.utf8), row.constant) == row.equal, "\(row.value) against \(row.constant)")
        }
        // "KEEP-ALIVE" with its K's high bit set (0xCB): obs-text, not a letter.
        #expect(try !compare([0xCB] + Array("EEP-ALIVE".utf8), "keep-alive"))
    }

    /// The path ends at the first `?`; the query is everything after it, empty or not.
    @Test func pathAndQuerySplitAtTheFirstQuestionMark() throws {
        let cases: [(target: String, path: String, query: String?)] = [
            ("/", "/", nil), ("/a", "/a", nil), ("/a?", "/a", ""), ("/?q", "/", "q"), ("/a?b?c", "/a", "b?c"),
            ("/a/b/c?x=1", "/a/b/c", "x=1"), ("*", "*", nil), ("/" + String(repeating: "p", count: 300) + "?z", "/" + String(repeating: "p", count: 300), "z"),
        ]
        for (target, path, query) in cases {
            let head = try request("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")
            #expect(head.path == path[...], "\(target)")
            #expect(head.query == query.map { $0[...] }, "\(target)")
        }
    }

    static let refusedRequests: [(String, String, HTTPParseError)] = [
        ("obsolete line folding", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", .malformed("obsolete line folding")),
        ("space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", .malformed("malformed header name")),
        ("no colon", "GET / HTTP/1.1\r\nBad Header\r\n\r\n", .malformed("header line without colon")),
        ("empty name", "GET / HTTP/1.1\r\n: v\r\n\r\n", .malformed("malformed header name")),
        ("control character in value", "GET / HTTP/1.1\r\nA: b\u{01}c\r\n\r\n", .malformed("control character in header value")),
        ("DEL in value", "GET / HTTP/1.1\r\nA: b\u{7F}\r\n\r\n", .malformed("control character in header value")),
        ("method with a slash", "GE/T / HTTP/1.1\r\n\r\n", .malformed("malformed method")),
        ("two spaces", "GET  / HTTP/1.1\r\n\r\n", .malformed("malformed request line")),
        ("missing version", "GET /\r\n\r\n", .malformed("malformed request line")),
        ("HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", .unsupportedVersion),
        ("HTTP/1.2", "GET / HTTP/1.2\r\n\r\n", .unsupportedVersion),
        ("not HTTP", "GET / FTP/1.1\r\n\r\n", .malformed("malformed HTTP version")),
        ("empty request line", "\r\n\r\n", .malformed("empty request line")),
    ]

    @Test(arguments: refusedRequests)
    func refusesMalformedRequests(_ name: String, _ text: String, _ expected: HTTPParseError) {
        #expect(throws: expected, "\(name)") { _ = try request(text) }
    }

    @Test func refusesTooManyHeaderFields() {
        let fields = (0...HTTPHeadParser.maxHeaderCount).map { "X-\($0): v\r\n" }.joined()
        #expect(throws: HTTPParseError.headTooLarge) { _ = try request("GET / HTTP/1.1\r\n" + fields + "\r\n") }
    }

    static let framings: [(String, [(String, String)], BodyFraming?)] = [
        ("none", [], BodyFraming.none),
        ("length", [("Content-Length", "12")], .length(12)),
        ("zero length", [("Content-Length", "0")], BodyFraming.none),
        ("equal duplicate lengths", [("Content-Length", "5"), ("content-length", "5")], .length(5)),
        ("chunked", [("Transfer-Encoding", "chunked")], .chunked),
        ("chunked any case", [("transfer-encoding", "Chunked")], .chunked),
        // nil: refused.
        ("differing lengths", [("Content-Length", "5"), ("Content-Length", "6")], nil),
        ("list in one length", [("Content-Length", "5, 5")], nil),
        ("signed length", [("Content-Length", "+5")], nil),
        ("negative length", [("Content-Length", "-1")], nil),
        ("huge length", [("Content-Length", "9999999999999999999")], nil),
        ("length and chunked", [("Content-Length", "3"), ("Transfer-Encoding", "chunked")], nil),
        ("gzip then chunked", [("Transfer-Encoding", "gzip, chunked")], nil),
        ("chunked twice", [("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")], nil),
        ("identity", [("Transfer-Encoding", "identity")], nil),
    ]

    @Test(arguments: framings)
    func requestFraming(_ name: String, _ fields: [(String, String)], _ expected: BodyFraming?) {
        let text = "POST / HTTP/1.1\r\nHost: h\r\n" + fields.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        let framing = try? HTTPHeadParser.requestFraming(request(text))
        #expect(framing == expected, "\(name)")
    }

    @Test func parsesResponsesAndTheirFraming() throws {
        let head = try response("HTTP/1.1 418 I'm a teapot\r\nX-A: 1\r\nContent-Length: 4\r\n\r\n")
        #expect(head.status == 418)
        #expect(head.reason == "I'm a teapot")
        #expect(try HTTPHeadParser.responseFraming(head, requestMethod: "GET") == .length(4))
        #expect(try HTTPHeadParser.responseFraming(head, requestMethod: "HEAD") == BodyFraming.none)
        let noLength = try response("HTTP/1.1 200 OK\r\n\r\n")
        #expect(try HTTPHeadParser.responseFraming(noLength, requestMethod: "GET") == .untilClose)
        for status in [204, 304, 101] {
            let bodyless = try response("HTTP/1.1 \(status) X\r\nContent-Length: 9\r\n\r\n")
            #expect(try HTTPHeadParser.responseFraming(bodyless, requestMethod: "GET") == BodyFraming.none)
        }
        #expect(throws: HTTPParseError.self) { _ = try response("HTTP/1.1 2000 OK\r\n\r\n") }
        #expect(throws: HTTPParseError.self) { _ = try response("HTTP/1.1 20 OK\r\n\r\n") }
        // RFC 9110 section 15: codes outside 100...599 are invalid; "099" would have been
        // forwarded as a two-digit "99" (independent sweep).
        for status in ["000", "099", "600", "999"] {
            #expect(throws: HTTPParseError.self, "\(status)") { _ = try response("HTTP/1.1 \(status) Weird\r\n\r\n") }
        }
        #expect(try response("HTTP/1.1 100 Continue\r\n\r\n").status == 100)
        #expect(try response("HTTP/1.1 599 Edge\r\n\r\n").status == 599)
        #expect(throws: HTTPParseError.self) { _ = try response("SIP/2.0 200 OK\r\n\r\n") }
    }

    static let chunkSizes: [(String, Int?)] = [
        ("0", 0), ("a", 10), ("FF", 255), ("1f;name=value", 31), ("10 ", 16),
        ("", nil), ("g", nil), ("-1", nil), (";x", nil), ("1000000000000000", nil), ("0x10", nil),
        // Leading zeros do not count against the 15 significant digits (RFC 9112 section 7.1:
        // 1*HEXDIG); 16 of them cut an upstream's answer until stop 32 (independent sweep).
        ("0000000000000005", 5), ("0000000000000000000000005;x=y", 5), ("00000000000000000", 0),
        ("000000000000000fffffffffffffff", 0xfffffffffffffff), ("0001000000000000000", nil),
    ]

    @Test(arguments: chunkSizes)
    func chunkSizeLines(_ line: String, _ expected: Int?) {
        #expect(BodyDecoder.parseChunkSize(Array(line.utf8)) == expected, "\(line)")
    }
}
