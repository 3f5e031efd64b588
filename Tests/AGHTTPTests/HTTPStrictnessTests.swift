@testable import AGHTTP
import Testing

/// Input that is refused, not guessed (issue 9 item 6), at the parser: each row was accepted
/// or guessed at before.
@Suite struct HTTPStrictnessTests {
    static let refused: [(String, String, HTTPParseError)] = [
        ("bare LF everywhere", "GET / HTTP/1.1\nHost: h\n\n", .malformed("bare LF line ending")),
        ("bare LF after a field", "GET / HTTP/1.1\r\nHost: h\n\r\n", .malformed("bare LF line ending")),
        ("bare LF ending the head", "GET / HTTP/1.1\r\nHost: h\r\n\n", .malformed("bare LF line ending")),
        ("no Host on HTTP/1.1", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", .malformed("missing Host header")),
        ("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", .malformed("more than one Host header")),
        ("two Hosts on HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", .malformed("more than one Host header")),
        ("a fragment", "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("a fragment (#) in the request target")),
        ("a fragment after a query", "GET /a?x=1#b HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("a fragment (#) in the request target")),
        ("CONNECT", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", .unsupportedMethod("CONNECT")),
        ("CONNECT with a path", "CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", .unsupportedMethod("CONNECT")),
        // Upstreams that upper-case methods would read these as CONNECT (sweep of stop 35's fixes).
        ("connect", "connect /x HTTP/1.1\r\nHost: h\r\n\r\n", .unsupportedMethod("CONNECT")),
        ("Connect", "Connect h:443 HTTP/1.1\r\nHost: h\r\n\r\n", .unsupportedMethod("CONNECT")),
    ]

    @Test(arguments: refused)
    func refusedHeads(_ name: String, _ text: String, _ expected: HTTPParseError) {
        #expect(throws: expected, "\(name)") { _ = try HTTPHeadParser.parseRequest(Array(text.utf8)) }
    }

    @Test func hostIsOptionalOnlyOnHTTP10() throws {
        #expect(try HTTPHeadParser.parseRequest(Array("GET / HTTP/1.0\r\n\r\n".utf8)).versionMinor == 0)
    }

    @Test func transferEncodingOnHTTP10IsRefused() throws {
        let head = try HTTPHeadParser.parseRequest(Array("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        #expect(throws: HTTPParseError.malformed("Transfer-Encoding in an HTTP/1.0 request")) {
            _ = try HTTPHeadParser.requestFraming(head)
        }
        let lengthOnly = try HTTPHeadParser.parseRequest(Array("POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\n".utf8))
        #expect(try HTTPHeadParser.requestFraming(lengthOnly) == .length(3))
    }

    static let chunkLines: [(String, Int?)] = [
        ("5;a=b", 5), ("5 ; a = b", 5), ("5;a", 5), ("5;a=\"x y\";b", 5), ("5;a=\"q\\\"uote\"", 5), ("5\t", 5),
        ("5 junk", nil), ("5;", nil), ("5;=b", nil), ("5;a=", nil), ("5;a=\"open", nil), ("5;a b", nil), ("5,6", nil),
        ("5\u{0}", nil), ("5;a=b c", nil),
    ]

    @Test(arguments: chunkLines)
    func chunkExtensionsAreParsedAndJunkRefused(_ line: String, _ expected: Int?) {
        #expect(BodyDecoder.parseChunkSize(Array(line.utf8)) == expected, "\(line)")
    }

    /// Chunked bodies whose every line ends in CRLF decode, trailers dropped; a bare LF
    /// anywhere in the coding's lines, or a trailer that is not a field line, is refused —
    /// whole, in pieces and byte by byte (the bare-LF rows were accepted before).
    static let chunkedBodies: [(String, String, String)] = [
        ("plain", "5\r\nhello\r\n0\r\n\r\n", "done hello"),
        ("extension and trailer", "5;a=b\r\nhello\r\n0\r\nX-T: 1\r\nX-U:\t\r\n\r\n", "done hello"),
        ("bare LF after the size", "5\nhello\r\n0\r\n\r\n", "malformed"),
        ("bare LF after the data", "5\r\nhello\n0\r\n\r\n", "malformed"),
        ("bare LF everywhere", "5\nhello\n0\n\n", "malformed"),
        ("bare LF after the last chunk", "5\r\nhello\r\n0\n\r\n", "malformed"),
        ("bare LF ending the trailers", "5\r\nhello\r\n0\r\n\n", "malformed"),
        ("bare LF after a trailer", "5\r\nhello\r\n0\r\nX-T: 1\n\r\n", "malformed"),
        ("CR without LF after the data", "5\r\nhello\rX0\r\n\r\n", "malformed"),
        ("trailer without a colon", "0\r\nnot a field\r\n\r\n", "malformed"),
        ("folded trailer", "0\r\nX-T: 1\r\n 2\r\n\r\n", "malformed"),
        ("trailer with a NUL", "0\r\nX-T: a\u{0}b\r\n\r\n", "malformed"),
        // The trailer section is bounded like a head (stop 36's sweep: 50 MB were read).
        ("trailers up to 16 KiB", "0\r\n" + String(repeating: "X-T: " + String(repeating: "a", count: 1017) + "\r\n", count: 16) + "\r\n", "done "),
        ("trailers over 16 KiB", "0\r\n" + String(repeating: "X-T: " + String(repeating: "a", count: 1017) + "\r\n", count: 17) + "\r\n", "malformed"),
    ]

    @Test(arguments: chunkedBodies)
    func chunkedLinesEndInCRLF(_ name: String, _ body: String, _ expected: String) {
        let input = Array(body.utf8)
        for pieces in [[], [3], [1]] {
            let outcome = BodyDecoderProbe.chunked(input, pieceSizes: pieces)
            let got = outcome.verdict == "done" ? "done " + String(decoding: outcome.body, as: UTF8.self) : outcome.verdict
            #expect(got == expected, "\(name), pieces \(pieces)")
        }
    }

    /// An absolute-form target (RFC 9112 section 3.2.2: a server must accept it) is read as
    /// its path and query, its authority kept apart (it stands before `Host`); it was passed
    /// on whole before, and no route matched a path starting with `http:`.
    static let absoluteTargets: [(String, String, String?, Bool)] = [
        ("http://api.example.com/a/b?q=1", "/a/b?q=1", "api.example.com", false),
        ("HTTPS://Api.Example.com:8443/a", "/a", "Api.Example.com:8443", false),
        ("http://h", "/", "h", true),
        ("http://h?x=1", "/?x=1", "h", true),
        ("http://[::1]:8080/p", "/p", "[::1]:8080", false),
        ("/plain?x=1", "/plain?x=1", nil, false),
        ("ftp://h/p", "ftp://h/p", nil, false),
        ("*", "*", nil, false),
        ("h:443", "h:443", nil, false),
    ]

    @Test(arguments: absoluteTargets)
    func absoluteFormTargetsAreReadAsPathAndAuthority(_ sent: String, _ target: String, _ authority: String?, _ lacksSlash: Bool) throws {
        let head = try HTTPHeadParser.parseRequest(Array("GET \(sent) HTTP/1.1\r\nHost: other\r\n\r\n".utf8))
        #expect(head.target == target)
        #expect(head.authorityRange.map { String(decoding: head.headers.storage[$0], as: UTF8.self) } == authority)
        #expect(head.targetLacksSlash == lacksSlash)
        #expect((head.targetLacksSlash ? "/" : "") + String(decoding: head.headers.storage[head.targetRange], as: UTF8.self) == target)
    }

    static let refusedTargets: [(String, HTTPParseError)] = [
        ("GET http://user@h/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("userinfo in the request target")),
        ("GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("no host in the request target")),
        ("GET http://h\"x/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("malformed request target")),
        ("GET http://h/p HTTP/1.1\r\n\r\n", .malformed("missing Host header")),
        ("GET http://h:99999/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("malformed request target")),
        ("GET http://h:8x/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("malformed request target")),
        ("GET http://:80/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("malformed request target")),
        ("GET http://[::1/p HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("malformed request target")),
    ]

    /// RFC 9112 section 3.2: a `Host` that is not `uri-host [ ":" port ]` is a 400 (these were
    /// accepted and relayed as the gateway-set `X-Forwarded-Host`), on HTTP/1.0 too.
    static let invalidHosts = [
        "a b", "evil.example/x?y", "evil.example/", "user@evil.example", "evil.example, good.example", "<script>",
        "evil.example:99999x", "evil.example:99999", "evil.example:123456", "evil.example:-1", ":8080", "a:b:c",
        "[::1", "[]", "[::1]x", "[::1]:8o", "x[y]", "%zz.example", "a%2", "h\\x", "h\"q", "h{x}", "h|x", "h`x", "h^x",
    ]

    @Test(arguments: invalidHosts, [1, 0])
    func invalidHostValuesAreRefused(_ host: String, _ minor: Int) {
        #expect(throws: HTTPParseError.malformed("invalid Host header"), "\(host)") {
            _ = try HTTPHeadParser.parseRequest(Array("GET / HTTP/1.\(minor)\r\nHost: \(host)\r\n\r\n".utf8))
        }
    }

    /// Registered names, IPv4 and IPv6 literals with or without a port, percent-encoded
    /// bytes, sub-delims (`a,b` is a reg-name by RFC 3986's grammar), and the empty value a
    /// target without an authority calls for (RFC 9110 section 7.2).
    static let validHosts = [
        "example.com", "EXAMPLE.com:8080", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080", "[fe80::1%25eth0]:443",
        "h:", "h:65535", "xn--bcher-kva.example", "a%41b", "a,b", "a_b~c!$&'()*+;=", "",
    ]

    @Test(arguments: validHosts)
    func validHostValuesAreAccepted(_ host: String) throws {
        let head = try HTTPHeadParser.parseRequest(Array("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n".utf8))
        #expect(head.headers.first { $0.name == .host }.map { String(decoding: head.headers.storage[$0.valueRange], as: UTF8.self) } == host)
    }

    @Test(arguments: refusedTargets)
    func badAbsoluteFormTargetsAreRefused(_ text: String, _ expected: HTTPParseError) {
        #expect(throws: expected) { _ = try HTTPHeadParser.parseRequest(Array(text.utf8)) }
    }

    @Test func boundaryFindsTheHeadOrABareLF() {
        #expect(HTTPHeadParser.boundary(Array("GET / HTTP/1.1\r\nHost: h\r\n\r\nBODY".utf8).span) == .complete(length: 27))
        #expect(HTTPHeadParser.boundary(Array("GET / HTTP/1.1\r\nHost: h\r\n".utf8).span) == .incomplete)
        #expect(HTTPHeadParser.boundary(Array("GET / HTTP/1.1\nHost".utf8).span) == .bareLineFeed)
    }

    @Test func reasonPhrasesWithControlBytesAreNotClean() throws {
        for (reason, clean) in [("OK", true), ("I'm a teapot", true), ("Caf\u{E9}", true), ("O\rK", false), ("O\u{0}K", false),
                                ("O\u{1B}K", false), ("O\u{7F}", false), ("\tTab", true)] {
            let head = try HTTPHeadParser.parseResponse(Array("HTTP/1.1 200 \(reason)\r\n\r\n".utf8))
            #expect(head.reasonIsClean == clean, "\(reason.debugDescription)")
        }
    }

    @Test func fieldNamesAreInternedWithLookalikes() throws {
        let head = try HTTPHeadParser.parseRequest(Array(
            "GET / HTTP/1.1\r\nhOsT: h\r\nX_Forwarded_For: 1\r\nx-request-id: r\r\nX-Other: o\r\nContent-Length: 0\r\n\r\n".utf8))
        #expect(head.headers.map(\.name) == [.host, .other, .xRequestID, .other, .contentLength])
        #expect(head.headers.map(\.lookalike) == [.host, .xForwardedFor, .xRequestID, .other, .contentLength])
        #expect(head.headers[.xRequestID] == "r")
        #expect(head.headers["X-OTHER"] == "o")
        for name in HTTPFieldName.allCases where name != .other { #expect(HTTPFieldName(name.text.uppercased()) == name) }
    }

    @Test func writerWritesNumbersAndFields() throws {
        var writer = HTTPHeadWriter()
        for value in [0, 7, 10, 1234567890, Int.max] {
            writer.reset()
            writer.append(decimal: value)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == String(value))
        }
        let head = try HTTPHeadParser.parseRequest(Array("GET /p?q HTTP/1.1\r\nHost:   h  \r\nX-A: 1\r\n\r\n".utf8))
        writer.reset()
        for field in head.headers { writer.appendField(field, of: head.headers) }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "Host: h\r\nX-A: 1\r\n")
        let wroteHost = writer.wroteHost
        #expect(wroteHost)
        #expect(head.headers.storage[head.targetRange] == ArraySlice("/p?q".utf8))
        writer.reset()
        writer.append(decimal: -42)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "-42")
        // Every digit count and its edges, every pair of digits, both signs, the extremes and
        // random values, written one after another into a small writer that has to grow.
        var values = [Int.min, Int.max, Int.min + 1] + Array(-100...1000)
        var power = 1
        for _ in 0..<19 {
            values += [power - 1, power, power + 1, -power]
            if power <= Int.max / 10 { power *= 10 }
        }
        for _ in 0..<200 { values.append(Int.random(in: Int.min...Int.max) >> Int.random(in: 0..<63)) }
        var line = HTTPHeadWriter(capacity: 8)
        for value in values {
            line.append(decimal: value)
            line.append(",")
        }
        #expect(String(decoding: line.bytes, as: UTF8.self) == values.map { String($0) + "," }.joined())
    }

    /// The writer's buffer grows past its first capacity without losing or reordering bytes,
    /// and `reset()` keeps the capacity for the next head.
    @Test func writerGrowsAndResets() {
        var writer = HTTPHeadWriter(capacity: 1)
        var expected: [UInt8] = []
        for index in 0..<2_000 {
            let value = String(repeating: "v", count: index % 37)
            writer.appendField("X-\(index)", value)
            expected += Array("X-\(index): \(value)\r\n".utf8)
        }
        writer.append(Array("tail".utf8)[1...])
        expected += Array("ail".utf8)
        #expect(writer.bytes == expected)
        #expect(writer.count == expected.count)
        writer.reset()
        writer.appendCRLF()
        #expect(writer.bytes == [0x0D, 0x0A])
    }
}
