import AGHTTP

/// The HTTP layer's parsers: the first code every byte from the network reaches.
enum HTTPTargets {
    /// A head that parses has no CR, LF or NUL in any field, and its framing is decided
    /// (never both Content-Length and Transfer-Encoding).
    static let head = FuzzTarget(
        name: "http-head", summary: "HTTPHeadParser: request and response heads, body framing",
        seeds: {
            ["GET /api/x?a=1 HTTP/1.1\r\nHost: a\r\nX-Attest-Key-Id: spoof\r\n\r\n",
             "POST /api/v1/attestation/refresh HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
             "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
             "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HTTP/1.0 204 No Content\r\n\r\n",
             "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"].map(\.bytes)
        }
    ) { input in
        let request = try? HTTPHeadParser.parseRequest(input)
        if let request {
            if let problem = clean(request.headers) { return "request head: \(problem)" }
            _ = try? HTTPHeadParser.requestFraming(request)
        }
        let response = try? HTTPHeadParser.parseResponse(input)
        if let response {
            if let problem = clean(response.headers) { return "response head: \(problem)" }
            _ = try? HTTPHeadParser.responseFraming(response, requestMethod: "GET")
        }
        return nil
    }

    static func clean(_ headers: HTTPFields) -> String? {
        for field in headers.fields {
            if field.name.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: ":") }) { return "field name \(field.name.debugDescription)" }
            if field.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) { return "field value \(field.value.debugDescription)" }
        }
        return nil
    }

    /// The chunked decoder gives the same body, verdict and leftover however the input is cut
    /// into reads (the first byte of the input chooses the cuts).
    static let chunked = FuzzTarget(
        name: "http-chunked", summary: "BodyDecoder (chunked) on evbuffers, fed whole and in pieces",
        seeds: {
            ["\u{3}5\r\nhello\r\n0\r\n\r\n", "\u{1}a;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nGET / HTTP/1.1\r\n",
             "\u{7}5 junk\r\nhello\r\n0\r\n\r\n", "\u{2}fffffffffffffff\r\n", "\u{4}0\r\n\r\n"].map(\.bytes)
        }
    ) { input in
        guard let first = input.first else { return nil }
        let body = Array(input.dropFirst())
        let whole = BodyDecoderProbe.chunked(body, pieceSizes: [])
        let cuts = [Int(first & 0x0F) + 1, Int(first >> 4) + 1]
        let pieces = BodyDecoderProbe.chunked(body, pieceSizes: cuts)
        let bytewise = BodyDecoderProbe.chunked(body, pieceSizes: [1])
        guard whole == pieces, whole == bytewise else {
            return "decoding depends on how the input is cut: whole \(whole.verdict) \(whole.body.count)B, pieces \(pieces.verdict) \(pieces.body.count)B, bytewise \(bytewise.verdict) \(bytewise.body.count)B"
        }
        return nil
    }
}
