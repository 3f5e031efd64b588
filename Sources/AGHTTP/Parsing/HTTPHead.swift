#if canImport(Glibc)
import Glibc
#endif

/// The parsed start line and header fields of an HTTP/1.x request.
public struct HTTPRequestHead: Sendable {
    public let method: String
    /// The request target in origin form (path and query): as sent, or the path and query of
    /// an absolute-form target (`http://host/path?query`, RFC 9112 section 3.2.2), with `/`
    /// for an empty path.
    public let target: String
    public let versionMinor: Int
    public let headers: HTTPFields
    /// Where the origin-form target lies in `headers.storage`, for forwarding it without a
    /// copy (after a `/` when `targetLacksSlash`).
    public let targetRange: Range<Int>
    /// An absolute-form target's authority in `headers.storage`: the host the client named,
    /// which RFC 9112 section 3.2.2 puts before the `Host` field. Nil for origin form.
    public let authorityRange: Range<Int>?
    /// An absolute-form target with an empty path (`http://host` or `http://host?query`):
    /// its origin form starts with a `/` that `targetRange` does not hold.
    public let targetLacksSlash: Bool

    /// A head for a reply the server makes up itself (a refused or timed-out request).
    static let unparsed = HTTPRequestHead(method: "", target: "", versionMinor: 1, headers: HTTPFields(), targetRange: 0..<0,
                                          authorityRange: nil, targetLacksSlash: false)

    /// `unparsed`, with the method and path of `head`'s request line when they read as such
    /// (a token, then visible ASCII up to the next space), so that the access-log line of a
    /// refused request says what was asked; empty otherwise. Only the refusal path calls it.
    /// Logged like an accepted request's: the path alone — no query, no fragment, and of an
    /// absolute-form target nothing before its path (its authority may hold `user:password@`:
    /// a sweep of stop 35's fixes found refused ones logged whole); a target in any other form
    /// (`host:port`, `*`) only without an `@`.
    static func unparsed(requestLineOf head: [UInt8]) -> HTTPRequestHead {
        let line = head.prefix { $0 != 0x0D && $0 != 0x0A }
        let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, (1...32).contains(parts[0].count), parts[0].allSatisfy(HTTPHeadParser.isTokenByte),
              !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return unparsed }
        var path = parts[1].prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        if path.first != UInt8(ascii: "/") {
            if let scheme = path.firstRange(of: Array("://".utf8)) {
                let afterScheme = path[scheme.upperBound...]
                path = afterScheme.firstIndex(of: UInt8(ascii: "/")).map { afterScheme[$0...] } ?? afterScheme[afterScheme.endIndex...]
            } else if path.contains(UInt8(ascii: "@")) {
                path = path[path.endIndex...]
            }
        }
        return HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: path, as: UTF8.self),
                               versionMinor: 1, headers: HTTPFields(), targetRange: 0..<0, authorityRange: nil, targetLacksSlash: false)
    }

    /// The path part of the target, without the query.
    public var path: Substring {
        guard let q = queryMark else { return target[...] }
        return target[..<target.utf8.index(target.startIndex, offsetBy: q)]
    }

    public var query: Substring? {
        guard let q = queryMark else { return nil }
        return target[target.utf8.index(target.startIndex, offsetBy: q + 1)...]
    }

    /// The offset of the first `?` in the target. A byte search over the target's span: the
    /// target is ASCII (the parser refuses anything else), and `UTF8View.firstIndex(of:)`
    /// cost ~30 instructions a byte.
    private var queryMark: Int? {
        let bytes = target.utf8.span
        for offset in 0..<bytes.count where bytes[offset] == UInt8(ascii: "?") { return offset }
        return nil
    }
}

/// The parsed status line and header fields of an HTTP/1.x response.
public struct HTTPResponseHead: Sendable {
    public let status: Int
    public let versionMinor: Int
    public let headers: HTTPFields
    /// Where the reason phrase lies in `headers.storage`.
    public let reasonRange: Range<Int>
    /// The phrase has only the bytes RFC 9112 allows (HTAB, SP, VCHAR, obs-text), so it may be
    /// relayed; otherwise the gateway writes its own.
    public let reasonIsClean: Bool

    public var reason: String { String(decoding: headers.storage[reasonRange], as: UTF8.self) }
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
    /// The request line alone is longer than the head may be (RFC 9112 section 3: 414).
    case requestLineTooLong
    case malformed(String)
    case unsupportedTransferEncoding
    /// A method the gateway never serves (`CONNECT`: it is no forward proxy, and a tunnel
    /// would take the connection out of HTTP, RFC 9110 section 9.3.6).
    case unsupportedMethod(String)
    case unsupportedVersion

    public var status: Int {
        switch self {
        case .headTooLarge: 431
        case .requestLineTooLong: 414
        case .malformed: 400
        case .unsupportedTransferEncoding, .unsupportedMethod: 501
        case .unsupportedVersion: 505
        }
    }

    public var message: String {
        switch self {
        case .headTooLarge: "request header section too large"
        case .requestLineTooLong: "request line too long"
        case .malformed(let why): why
        case .unsupportedTransferEncoding: "unsupported transfer-encoding"
        case .unsupportedMethod(let method): "\(method) is not supported: the gateway is a reverse proxy, not a tunnel"
        case .unsupportedVersion: "unsupported HTTP version"
        }
    }
}

/// Steps through the CRLF-terminated lines of a head. A bare LF is an error (RFC 9112
/// section 2.2 allows refusing it, and guessing is how requests get smuggled).
struct LineCursor {
    var position = 0

    /// The next line's range (without its CRLF); nil at the end of the bytes.
    ///
    /// The line feed is found by `memchr` (a byte loop here cost ~10 instructions a byte, a
    /// start line ~250).
    mutating func next(_ bytes: Span<UInt8>) throws(HTTPParseError) -> Range<Int>? {
        let start = position
        guard start < bytes.count else { return nil }
        let found = bytes.withUnsafeBufferPointer { buffer -> Int? in
            guard let base = buffer.baseAddress, let hit = memchr(base + start, 0x0A, buffer.count - start) else { return nil }
            return UnsafeRawPointer(hit) - UnsafeRawPointer(base)
        }
        guard let index = found else { return nil }
        guard index > start, bytes[index - 1] == 0x0D else { throw .malformed("bare LF line ending") }
        position = index + 1
        return start..<(index - 1)
    }
}

/// Where a head ends in the bytes received so far.
public enum HeadBoundary: Equatable, Sendable {
    /// The head is complete and `length` bytes long (blank line included).
    case complete(length: Int)
    /// No blank line yet.
    case incomplete
    /// A line ends in a bare LF: refuse now rather than wait for a CRLF that may never come.
    case bareLineFeed
}
