internal import CShims

/// Parses message heads from their raw bytes (everything up to and including the blank line)
/// into `HTTPFields` ranges over those same bytes: no string is made per field.
///
/// Strict where leniency enables request smuggling: CRLF only, no obs-fold, no whitespace
/// before the colon, one valid Content-Length, never both Content-Length and
/// Transfer-Encoding, exactly one Host on HTTP/1.1, no Transfer-Encoding on HTTP/1.0.
public enum HTTPHeadParser {
    public static let maxHeaderCount = 100

    /// Finds the end of the head in `bytes` (the start of a connection's input).
    public static func boundary(_ bytes: Span<UInt8>) -> HeadBoundary {
        var index = 0
        var lineStart = 0
        while index < bytes.count {
            if bytes[index] == 0x0A {
                guard index > 0, bytes[index - 1] == 0x0D else { return .bareLineFeed }
                if index - 1 == lineStart { return .complete(length: index + 1) }
                lineStart = index + 1
            }
            index += 1
        }
        return .incomplete
    }

    public static func parseRequest(_ storage: [UInt8]) throws(HTTPParseError) -> HTTPRequestHead {
        var fieldList: [HTTPField] = []
        return try parseRequest(storage, fieldList: &fieldList)
    }

    /// `parseRequest`, the field list written into `fieldList`'s buffer: a connection passes
    /// the same array for every head, and once the previous head is gone its buffer is reused
    /// instead of a new one allocated per head.
    public static func parseRequest(_ storage: [UInt8], fieldList: inout [HTTPField]) throws(HTTPParseError) -> HTTPRequestHead {
        let bytes = storage.span
        var lines = LineCursor()
        guard let line = try lines.next(bytes), !line.isEmpty else { throw .malformed("empty request line") }
        guard let firstSpace = find(0x20, bytes, line),
              let secondSpace = find(0x20, bytes, (firstSpace + 1)..<line.upperBound),
              find(0x20, bytes, (secondSpace + 1)..<line.upperBound) == nil else {
            throw .malformed("malformed request line")
        }
        let method = line.lowerBound..<firstSpace
        let target = (firstSpace + 1)..<secondSpace
        guard !method.isEmpty, all(bytes, method, isTokenByte) else { throw .malformed("malformed method") }
        // RFC 9112 section 3.2: visible ASCII, and no form of request-target carries a fragment.
        guard !target.isEmpty, all(bytes, target, { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }) else {
            let fragment = find(UInt8(ascii: "#"), bytes, target) != nil
            throw .malformed(fragment ? "a fragment (#) in the request target" : "malformed request target")
        }
        if isConnect(bytes, method) { throw .unsupportedMethod("CONNECT") }
        let minor = try parseVersion(bytes, (secondSpace + 1)..<line.upperBound)
        var origin = target
        var authority: Range<Int>?
        if bytes[target.lowerBound] != UInt8(ascii: "/"), let absolute = try absoluteForm(bytes, target) {
            (authority, origin) = absolute
        }
        let headers = try parseFields(storage, &lines, into: &fieldList)
        var hosts = 0
        var host: HTTPField?
        for field in headers where field.name == .host {
            hosts += 1
            host = field
        }
        guard hosts <= 1 else { throw .malformed("more than one Host header") }
        guard hosts == 1 || minor == 0 else { throw .malformed("missing Host header") }
        // RFC 9112 section 3.2: an invalid Host value is a 400. An empty one is valid (a target
        // URI without an authority, RFC 9110 section 7.2).
        if let host, !host.valueRange.isEmpty, !isAuthority(bytes, host.valueRange) {
            throw .malformed("invalid Host header")
        }
        let lacksSlash = authority != nil && (origin.isEmpty || bytes[origin.lowerBound] != UInt8(ascii: "/"))
        let originText = String(decoding: storage[origin], as: UTF8.self)
        return HTTPRequestHead(method: knownMethod(bytes, method) ?? String(decoding: storage[method], as: UTF8.self),
                               target: lacksSlash ? "/" + originText : originText,
                               versionMinor: minor, headers: headers, targetRange: origin,
                               authorityRange: authority, targetLacksSlash: lacksSlash)
    }

    /// An absolute-form target (RFC 9112 section 3.2.2), which a server must accept: an
    /// `http` or `https` URI (scheme in any case) split into its authority and the rest (path
    /// and query, possibly empty). The authority must name a host and carry no userinfo (RFC
    /// 9110 section 4.2.4). Nil for any other target (asterisk or authority form, another
    /// scheme), which stays as sent.
    static func absoluteForm(_ bytes: Span<UInt8>, _ target: Range<Int>) throws(HTTPParseError) -> (authority: Range<Int>, rest: Range<Int>)? {
        // "http" or "https", any case (`| 0x20` lowers a letter and maps no other byte onto one
        // of these), then "://".
        var index = target.lowerBound
        for letter in "http".utf8 {
            guard index < target.upperBound, bytes[index] | 0x20 == letter else { return nil }
            index += 1
        }
        if index < target.upperBound, bytes[index] | 0x20 == UInt8(ascii: "s") { index += 1 }
        guard index + 3 <= target.upperBound, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
              bytes[index + 2] == UInt8(ascii: "/") else { return nil }
        let start = index + 3
        var end = start
        while end < target.upperBound, bytes[end] != UInt8(ascii: "/"), bytes[end] != UInt8(ascii: "?") {
            guard isAuthorityByte(bytes[end]) else {
                throw .malformed(bytes[end] == UInt8(ascii: "@") ? "userinfo in the request target" : "malformed request target")
            }
            end += 1
        }
        guard end > start else { throw .malformed("no host in the request target") }
        guard isAuthority(bytes, start..<end) else { throw .malformed("malformed request target") }
        return (start..<end, end..<target.upperBound)
    }

    /// `uri-host [ ":" port ]` without userinfo (RFC 9110 sections 4.2.1 and 7.2, RFC 3986
    /// section 3.2): an IP-literal in brackets, or a non-empty reg-name or IPv4 address of
    /// authority bytes (a `%` followed by two hex digits); then, after a colon, a port of at
    /// most five digits up to 65535 (RFC 3986 allows more digits and an empty port; no TCP
    /// port has more, and an empty one means the default). What the absolute-form target's
    /// authority and the `Host` field must be.
    static func isAuthority(_ bytes: Span<UInt8>, _ range: Range<Int>) -> Bool {
        var index = range.lowerBound
        guard index < range.upperBound else { return false }
        if bytes[index] == UInt8(ascii: "[") {
            index += 1
            while index < range.upperBound, bytes[index] != UInt8(ascii: "]") {
                guard isAuthorityByte(bytes[index]), bytes[index] != UInt8(ascii: "[") else { return false }
                index += 1
            }
            guard index < range.upperBound, index > range.lowerBound + 1 else { return false }
            index += 1
        } else {
            while index < range.upperBound, bytes[index] != UInt8(ascii: ":") {
                let byte = bytes[index]
                guard isAuthorityByte(byte), byte != UInt8(ascii: "["), byte != UInt8(ascii: "]") else { return false }
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < range.upperBound, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else { return false }
                    index += 2
                }
                index += 1
            }
            guard index > range.lowerBound else { return false }
        }
        guard index < range.upperBound else { return true }
        guard bytes[index] == UInt8(ascii: ":"), range.upperBound - index - 1 <= 5 else { return false }
        var port = 0
        index += 1
        while index < range.upperBound {
            let byte = bytes[index]
            guard byte >= 0x30 && byte <= 0x39 else { return false }
            port = port * 10 + Int(byte - 0x30)
            index += 1
        }
        return port <= 65535
    }

    @inline(__always)
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    /// A byte of an authority without userinfo: unreserved, `%`, sub-delims, `:`, `[`, `]`.
    private static func isAuthorityByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"),
             UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
             UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"):
            true
        default:
            false
        }
    }

    public static func parseResponse(_ storage: [UInt8]) throws(HTTPParseError) -> HTTPResponseHead {
        var fieldList: [HTTPField] = []
        return try parseResponse(storage, fieldList: &fieldList)
    }

    /// `parseResponse` with a reused field-list buffer (see `parseRequest(_:fieldList:)`).
    public static func parseResponse(_ storage: [UInt8], fieldList: inout [HTTPField]) throws(HTTPParseError) -> HTTPResponseHead {
        let bytes = storage.span
        var lines = LineCursor()
        guard let line = try lines.next(bytes), line.count >= 12 else { throw .malformed("malformed status line") }
        let start = line.lowerBound
        let minor = try parseVersion(bytes, start..<(start + 8))
        let code = (start + 9)..<(start + 12)
        guard bytes[start + 8] == 0x20, all(bytes, code, { $0 >= 0x30 && $0 <= 0x39 }),
              line.count == 12 || bytes[start + 12] == 0x20 else {
            throw .malformed("malformed status line")
        }
        var status = 0
        for index in code { status = status * 10 + Int(bytes[index] - 0x30) }
        // RFC 9110 section 15: three digits, 100 to 599; anything else is not a status to relay.
        guard (100...599).contains(status) else { throw .malformed("status code \(status) outside 100-599") }
        let reason = line.count > 13 ? (start + 13)..<line.upperBound : line.upperBound..<line.upperBound
        let clean = all(bytes, reason, isFieldValueByte)
        let headers = try parseFields(storage, &lines, into: &fieldList)
        return HTTPResponseHead(status: status, versionMinor: minor, headers: headers, reasonRange: reason, reasonIsClean: clean)
    }

    /// Request body framing. Requests without length or chunking have no body.
    public static func requestFraming(_ head: HTTPRequestHead) throws(HTTPParseError) -> BodyFraming {
        if head.versionMinor == 0, head.headers.contains(where: { $0.name == .transferEncoding }) {
            // RFC 9112 section 6.1: an HTTP/1.0 peer cannot mean chunked, so the framing is a guess.
            throw .malformed("Transfer-Encoding in an HTTP/1.0 request")
        }
        return try explicitFraming(head.headers) ?? .none
    }

    /// Response body framing, which also depends on the request method and status.
    public static func responseFraming(_ head: HTTPResponseHead, requestMethod: String) throws(HTTPParseError) -> BodyFraming {
        if requestMethod == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .none
        }
        return try explicitFraming(head.headers) ?? .untilClose
    }

    private static func explicitFraming(_ headers: HTTPFields) throws(HTTPParseError) -> BodyFraming? {
        var codings = 0
        var chunked = false
        var length: HTTPField?
        for field in headers {
            switch field.name {
            case .transferEncoding:
                headers.forEachListElement(of: field) { range in
                    codings += 1
                    chunked = headers.equalsIgnoringCase(range, chunkedToken)
                }
                if field.valueRange.isEmpty { codings += 1 }
            case .contentLength:
                if let first = length {
                    guard headers.storage[first.valueRange] == headers.storage[field.valueRange] else {
                        throw .malformed("invalid Content-Length")
                    }
                }
                length = field
            default:
                break
            }
        }
        if codings > 0 {
            guard length == nil else { throw .malformed("both Content-Length and Transfer-Encoding") }
            guard codings == 1, chunked else { throw .unsupportedTransferEncoding }
            return .chunked
        }
        guard let length else { return nil }
        guard let value = parseContentLength(headers.storage[length.valueRange]) else { throw .malformed("invalid Content-Length") }
        return value == 0 ? BodyFraming.none : .length(value)
    }

    /// `CONNECT` in any case: methods are case-sensitive (RFC 9110 section 9.1), but upstreams
    /// that upper-case them (gunicorn up to 22) would read `connect` as CONNECT.
    private static func isConnect(_ bytes: Span<UInt8>, _ range: Range<Int>) -> Bool {
        guard range.count == 7 else { return false }
        var index = range.lowerBound
        for letter in "connect".utf8 {
            guard bytes[index] | 0x20 == letter else { return false }
            index += 1
        }
        return true
    }

    /// `GET` and `POST` as string literals: decoding three or four bytes into a `String` (UTF-8
    /// validation of a small string) cost ~120 instructions per request. Others are decoded.
    private static func knownMethod(_ bytes: Span<UInt8>, _ range: Range<Int>) -> String? {
        switch range.count {
        case 3 where bytes[range.lowerBound] == UInt8(ascii: "G") && bytes[range.lowerBound + 1] == UInt8(ascii: "E")
            && bytes[range.lowerBound + 2] == UInt8(ascii: "T"):
            "GET"
        case 4 where bytes[range.lowerBound] == UInt8(ascii: "P") && bytes[range.lowerBound + 1] == UInt8(ascii: "O")
            && bytes[range.lowerBound + 2] == UInt8(ascii: "S") && bytes[range.lowerBound + 3] == UInt8(ascii: "T"):
            "POST"
        default:
            nil
        }
    }

    private static let chunkedToken = Array("chunked".utf8)
    private static let versionPrefix = Array("HTTP/1.".utf8)
    /// "HTTP/1." read as a little-endian word (its eighth byte zero).
    private static let versionPrefixWord: UInt64 = 0x2E_31_2F_50_54_54_48

    /// A Content-Length value: 1 to 18 decimal digits, nothing else.
    public static func parseContentLength(_ value: ArraySlice<UInt8>) -> Int? {
        guard !value.isEmpty, value.count <= 18 else { return nil }
        var result = 0
        for byte in value {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            result = result * 10 + Int(byte - 0x30)
        }
        return result
    }

    private static func parseVersion(_ bytes: Span<UInt8>, _ range: Range<Int>) throws(HTTPParseError) -> Int {
        // "HTTP/1.0" and "HTTP/1.1" as one eight-byte load, the prefix compared as a word (the
        // byte-wise comparison with the prefix array cost ~110 instructions per head).
        if range.count == 8 {
            let word = UInt64(littleEndian: bytes.bytes.unsafeLoadUnaligned(fromByteOffset: range.lowerBound, as: UInt64.self))
            if word & 0x00FF_FFFF_FFFF_FFFF == versionPrefixWord {
                switch word >> 56 {
                case UInt64(UInt8(ascii: "0")): return 0
                case UInt64(UInt8(ascii: "1")): return 1
                default: break
                }
            }
        }
        let prefix = versionPrefix
        guard range.count == 8, (0..<7).allSatisfy({ bytes[range.lowerBound + $0] == prefix[$0] }) else {
            if range.count >= 5, (0..<5).allSatisfy({ bytes[range.lowerBound + $0] == prefix[$0] }) { throw .unsupportedVersion }
            throw .malformed("malformed HTTP version")
        }
        switch bytes[range.lowerBound + 7] {
        case UInt8(ascii: "0"): return 0
        case UInt8(ascii: "1"): return 1
        default: throw .unsupportedVersion
        }
    }

    /// Parses field lines from the cursor up to the blank line.
    ///
    /// Each ordinary line is read in one pass (name bytes checked as they are scanned, value
    /// bytes checked while looking for its CRLF); a line with anything unusual in it is
    /// re-read by `slowField`, which decides which error it is, in the order the rules apply.
    static func parseFields(_ storage: [UInt8], _ lines: inout LineCursor) throws(HTTPParseError) -> HTTPFields {
        var list: [HTTPField] = []
        return try parseFields(storage, &lines, into: &list)
    }

    /// `parseFields` into `list`'s buffer, emptied first (reused when nothing else holds it).
    static func parseFields(_ storage: [UInt8], _ lines: inout LineCursor, into list: inout [HTTPField]) throws(HTTPParseError) -> HTTPFields {
        let bytes = storage.span
        let raw = bytes.bytes
        let count = bytes.count
        list.removeAll(keepingCapacity: true)
        list.reserveCapacity(16)
        let nameTables = HTTPFieldName.tables
        var position = lines.position
        while position < count {
            let first = bytes[position]
            if first == 0x0D, position + 1 < count, bytes[position + 1] == 0x0A {
                lines.position = position + 2
                return HTTPFields(storage: storage, list: list)
            }
            guard list.count < maxHeaderCount else { throw .headTooLarge }
            // Name: token bytes up to the colon, sixteen at a time while 16 bytes remain.
            var index = position
            var nameEnded = false
            while index + 16 <= count {
                let other = raw.withUnsafeBytes { Self.nonTokenMask16($0.baseAddress! + index) }
                if other != 0 {
                    index += other.trailingZeroBitCount
                    nameEnded = true
                    break
                }
                index += 16
            }
            if !nameEnded {
                while index < count, isTokenByte(bytes[index]) { index += 1 }
            }
            guard index > position, index < count, bytes[index] == UInt8(ascii: ":") else {
                list.append(try slowField(bytes, &lines, from: position))
                position = lines.position
                continue
            }
            let colon = index
            index += 1
            while index < count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
            let valueStart = index
            var valueEnd = index
            // Value: field-content bytes up to CRLF; the end moves past every non-blank byte.
            // Sixteen bytes at a time while they are all visible (tokens and cookies are long
            // runs); a word that is not skips straight to its first invisible byte, which the
            // byte test below then takes (each value's tail is read once, not once per byte).
            while index < count {
                if index + 16 <= count {
                    let invisible = raw.withUnsafeBytes { Self.invisibleMask16($0.baseAddress! + index) }
                    if invisible == 0 {
                        index += 16
                        valueEnd = index
                        continue
                    }
                    let visible = invisible.trailingZeroBitCount
                    if visible > 0 {
                        index += visible
                        valueEnd = index
                    }
                } else if index + 8 <= count {
                    let flags = Self.invisibleFlags(raw.unsafeLoadUnaligned(fromByteOffset: index, as: UInt64.self))
                    let visible = Self.visiblePrefix(flags)
                    if visible > 0 {
                        index += visible
                        valueEnd = index
                        if flags == 0 { continue }
                    }
                }
                let byte = bytes[index]
                if byte > 0x20 && byte != 0x7F {
                    index += 1
                    valueEnd = index
                } else if byte == 0x20 || byte == 0x09 {
                    index += 1
                } else {
                    break
                }
            }
            guard index + 1 < count, bytes[index] == 0x0D, bytes[index + 1] == 0x0A else {
                list.append(try slowField(bytes, &lines, from: position))
                position = lines.position
                continue
            }
            let names = HTTPFieldName.classify(bytes, position, colon, nameTables)
            list.append(HTTPField(name: names.exact, lookalike: names.lookalike, nameStart: Int32(position),
                                  nameEnd: Int32(colon), valueStart: Int32(valueStart), valueEnd: Int32(valueEnd)))
            position = index + 2
        }
        lines.position = position
        // Whatever is left has no CRLF: the cursor says whether it is a bare LF or a cut head.
        _ = try lines.next(bytes)
        throw .malformed("header section not terminated")
    }

    /// The flags of the bytes of `word` that are not visible field-content bytes (above 0x20,
    /// not DEL; obs-text 0x80–0xFF is visible), in each byte's high bit, `word` read in memory
    /// order (its first byte lowest). A byte below 0x21 sets its high bit in
    /// `(word - 0x21…) & ~word`, a DEL byte is a zero byte of `word ^ 0x7F…`. Either test may
    /// also flag a byte above a real hit (a borrow runs upwards), never one below it: the
    /// lowest flag is always the first invisible byte, and a clean word has none.
    @inline(__always)
    static func invisibleFlags(_ word: UInt64) -> UInt64 {
        let word = UInt64(littleEndian: word)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let below = (word &- ones &* 0x21) & ~word & high
        let del = word ^ (ones &* 0x7F)
        return below | ((del &- ones) & ~del & high)
    }

    /// A bit per byte of the 16 at `bytes` (bit i for byte i) that is not a visible
    /// field-content byte: SSE2 in `ag_invisible_mask16`, ~7 instructions where the two word
    /// tests took ~40. Its lowest set bit is the first invisible byte; 0 when all are visible.
    @inline(__always)
    static func invisibleMask16(_ bytes: UnsafeRawPointer) -> UInt32 {
        ag_invisible_mask16(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// A bit per byte of the 16 at `bytes` that is not a `tchar` (`isTokenByte`), by SSE2 in
    /// `ag_nontoken_mask16`; its lowest set bit ends a field name.
    @inline(__always)
    static func nonTokenMask16(_ bytes: UnsafeRawPointer) -> UInt32 {
        ag_nontoken_mask16(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// How many bytes of a word come before its first invisible one (8 when `flags` is 0).
    @inline(__always)
    static func visiblePrefix(_ flags: UInt64) -> Int {
        flags.trailingZeroBitCount >> 3
    }

    /// One field line the fast path could not take: split by the cursor (a bare LF is refused
    /// first), then checked rule by rule; returns the field when the line turns out valid.
    private static func slowField(_ bytes: Span<UInt8>, _ lines: inout LineCursor, from start: Int) throws(HTTPParseError) -> HTTPField {
        lines.position = start
        guard let line = try lines.next(bytes) else { throw .malformed("header section not terminated") }
        let first = bytes[line.lowerBound]
        guard first != 0x20, first != 0x09 else { throw .malformed("obsolete line folding") }
        guard let colon = find(UInt8(ascii: ":"), bytes, line) else { throw .malformed("header line without colon") }
        guard colon > line.lowerBound, all(bytes, line.lowerBound..<colon, isTokenByte) else {
            throw .malformed("malformed header name")
        }
        var valueStart = colon + 1
        var valueEnd = line.upperBound
        while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 { valueStart += 1 }
        while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        guard all(bytes, valueStart..<valueEnd, { ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }) else {
            throw .malformed("control character in header value")
        }
        let names = HTTPFieldName.classify(bytes, line.lowerBound, colon)
        return HTTPField(name: names.exact, lookalike: names.lookalike, nameStart: Int32(line.lowerBound),
                         nameEnd: Int32(colon), valueStart: Int32(valueStart), valueEnd: Int32(valueEnd))
    }

    @inline(__always)
    private static func find(_ byte: UInt8, _ bytes: Span<UInt8>, _ range: Range<Int>) -> Int? {
        var index = range.lowerBound
        while index < range.upperBound {
            if bytes[index] == byte { return index }
            index += 1
        }
        return nil
    }

    @inline(__always)
    private static func all(_ bytes: Span<UInt8>, _ range: Range<Int>, _ predicate: (UInt8) -> Bool) -> Bool {
        var index = range.lowerBound
        while index < range.upperBound {
            if !predicate(bytes[index]) { return false }
            index += 1
        }
        return true
    }

    /// RFC 9110 `tchar`: ``!#$%&'*+-.^_`|~``, digits and letters, looked up in a 128-bit set
    /// (bit `n` for byte `n`) rather than tested against fifteen cases and three ranges.
    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        if byte < 64 { return (tokenBytesBelow64 >> UInt64(byte)) & 1 != 0 }
        if byte < 128 { return (tokenBytesFrom64 >> UInt64(byte &- 64)) & 1 != 0 }
        return false
    }

    /// A byte a field value, a reason phrase or a quoted string may hold (RFC 9110 section
    /// 5.5): visible ASCII, obs-text, space or tab — not another control byte, not DEL.
    @inline(__always)
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    private static let tokenBytesBelow64: UInt64 = 0x03ff_6cfa_0000_0000
    private static let tokenBytesFrom64: UInt64 = 0x57ff_ffff_c7ff_fffe
}
