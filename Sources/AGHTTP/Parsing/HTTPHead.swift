/// The parsed start line and header fields of an HTTP/1.x request.
public struct HTTPRequestHead: Sendable {
    public var method: String
    /// The request target as sent (origin form: path and query).
    public var target: String
    public var versionMinor: Int
    public var headers: HTTPHeaders

    /// The path part of the target, without the query.
    public var path: Substring {
        if let q = target.firstIndex(of: "?") { return target[..<q] }
        return target[...]
    }

    public var query: Substring? {
        guard let q = target.firstIndex(of: "?") else { return nil }
        return target[target.index(after: q)...]
    }
}

/// The parsed status line and header fields of an HTTP/1.x response.
public struct HTTPResponseHead: Sendable {
    public var status: Int
    public var reason: String
    public var versionMinor: Int
    public var headers: HTTPHeaders
}

/// How a message body is delimited (RFC 9112 section 6).
public enum BodyFraming: Sendable, Equatable {
    case none
    case length(Int)
    case chunked
    /// Response bodies only: the body runs until the connection closes.
    case untilClose
}

/// Why a message head was refused; each maps to an HTTP status for requests.
public enum HTTPParseError: Error, Equatable, Sendable {
    case headTooLarge
    case malformed(String)
    case unsupportedTransferEncoding
    case unsupportedVersion

    public var status: Int {
        switch self {
        case .headTooLarge: 431
        case .malformed: 400
        case .unsupportedTransferEncoding: 501
        case .unsupportedVersion: 505
        }
    }

    public var message: String {
        switch self {
        case .headTooLarge: "request header section too large"
        case .malformed(let why): why
        case .unsupportedTransferEncoding: "unsupported transfer-encoding"
        case .unsupportedVersion: "unsupported HTTP version"
        }
    }
}

/// Parses message heads from raw bytes (everything up to and including the blank line).
///
/// Strict where leniency enables request smuggling: no obs-fold, no whitespace before the
/// colon, one valid Content-Length, never both Content-Length and Transfer-Encoding.
public enum HTTPHeadParser {
    public static let maxHeaderCount = 100

    public static func parseRequest(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPRequestHead {
        var lines = LineReader(bytes)
        guard let startLine = lines.next(), !startLine.isEmpty else { throw .malformed("empty request line") }
        let parts = startLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("malformed request line") }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { throw .malformed("malformed method") }
        guard !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .malformed("malformed request target") }
        let minor = try parseVersion(parts[2])
        let headers = try parseFields(&lines)
        return HTTPRequestHead(
            method: String(decoding: parts[0], as: UTF8.self),
            target: String(decoding: parts[1], as: UTF8.self),
            versionMinor: minor,
            headers: headers)
    }

    public static func parseResponse(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> HTTPResponseHead {
        var lines = LineReader(bytes)
        guard let startLine = lines.next(), startLine.count >= 12 else { throw .malformed("malformed status line") }
        let minor = try parseVersion(startLine[startLine.startIndex..<startLine.startIndex + 8])
        let codeBytes = startLine[startLine.startIndex + 9..<startLine.startIndex + 12]
        guard startLine[startLine.startIndex + 8] == UInt8(ascii: " "),
              codeBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              startLine.count == 12 || startLine[startLine.startIndex + 12] == UInt8(ascii: " ") else {
            throw .malformed("malformed status line")
        }
        let status = codeBytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        let reason = startLine.count > 13 ? String(decoding: startLine[(startLine.startIndex + 13)...], as: UTF8.self) : ""
        let headers = try parseFields(&lines)
        return HTTPResponseHead(status: status, reason: reason, versionMinor: minor, headers: headers)
    }

    /// Request body framing. Requests without length or chunking have no body.
    public static func requestFraming(_ headers: HTTPHeaders) throws(HTTPParseError) -> BodyFraming {
        if let framing = try explicitFraming(headers) { return framing }
        return .none
    }

    /// Response body framing, which also depends on the request method and status.
    public static func responseFraming(_ head: HTTPResponseHead, requestMethod: String) throws(HTTPParseError) -> BodyFraming {
        if requestMethod == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
            return .none
        }
        if let framing = try explicitFraming(head.headers) { return framing }
        return .untilClose
    }

    private static func explicitFraming(_ headers: HTTPHeaders) throws(HTTPParseError) -> BodyFraming? {
        let transferEncodings = headers.values("Transfer-Encoding")
        let lengths = headers.values("Content-Length")
        if !transferEncodings.isEmpty {
            guard lengths.isEmpty else { throw .malformed("both Content-Length and Transfer-Encoding") }
            let codings = transferEncodings.flatMap { $0.split(separator: ",") }.map { $0.trimmingASCIISpaces() }
            guard codings.count == 1, codings[0].equalsIgnoringASCIICase("chunked") else {
                throw .unsupportedTransferEncoding
            }
            return .chunked
        }
        guard let first = lengths.first else { return nil }
        guard lengths.allSatisfy({ $0 == first }), let length = parseContentLength(first) else {
            throw .malformed("invalid Content-Length")
        }
        return length == 0 ? BodyFraming.none : .length(length)
    }

    static func parseContentLength(_ value: String) -> Int? {
        guard !value.isEmpty, value.utf8.count <= 18, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(value)
    }

    private static func parseVersion(_ bytes: Slice<UnsafeRawBufferPointer>) throws(HTTPParseError) -> Int {
        guard bytes.count == 8, bytes.starts(with: "HTTP/1.".utf8) else {
            if bytes.starts(with: "HTTP/".utf8) { throw .unsupportedVersion }
            throw .malformed("malformed HTTP version")
        }
        switch bytes[bytes.startIndex + 7] {
        case UInt8(ascii: "0"): return 0
        case UInt8(ascii: "1"): return 1
        default: throw .unsupportedVersion
        }
    }

    private static func parseFields(_ lines: inout LineReader) throws(HTTPParseError) -> HTTPHeaders {
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(16)
        while let line = lines.next() {
            if line.isEmpty { return HTTPHeaders(fields) }
            guard fields.count < maxHeaderCount else { throw .headTooLarge }
            guard let first = line.first, first != UInt8(ascii: " "), first != UInt8(ascii: "\t") else {
                throw .malformed("obsolete line folding")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .malformed("header line without colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .malformed("malformed header name") }
            var valueStart = colon + 1
            var valueEnd = line.endIndex
            while valueStart < valueEnd, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            let value = line[valueStart..<valueEnd]
            guard value.allSatisfy({ $0 >= 0x20 || $0 == 0x09 }), !value.contains(0x7F) else {
                throw .malformed("control character in header value")
            }
            fields.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        throw .malformed("header section not terminated")
    }

    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

/// Splits a head into CRLF-terminated lines (a bare LF is accepted as a terminator too).
struct LineReader {
    private let bytes: UnsafeRawBufferPointer
    private var position: Int

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        self.position = 0
    }

    mutating func next() -> Slice<UnsafeRawBufferPointer>? {
        guard position < bytes.count else { return nil }
        guard let lf = bytes[position...].firstIndex(of: 0x0A) else { return nil }
        var end = lf
        if end > position, bytes[end - 1] == 0x0D { end -= 1 }
        let line = bytes[position..<end]
        position = lf + 1
        return line
    }
}
