/// A small blocking HTTP/1.1 client for one origin, keeping its connection alive between requests.
///
/// Requests are sequential; use one client per thread. Responses may be framed by
/// `Content-Length`, chunked transfer coding or connection close. Every request is bounded by
/// `timeout` from connect to the last body byte. When a kept-alive connection turns out to have
/// been closed by the server before any byte of the response arrived, the request is sent once
/// more on a fresh connection if that is safe: the request could not be written, or its method
/// is idempotent (a POST the server may have acted on is never sent twice).
public final class BlockingHTTPClient {
    public let endpoint: HTTPEndpoint
    /// Limit for one whole request, connect included.
    public var timeout: Duration
    /// Largest response head or body accepted.
    public var maximumResponseBytes: Int
    /// Connections opened so far; stays at 1 while keep-alive holds.
    public private(set) var connectionsOpened = 0

    private var connection: TCPConnection?
    private var buffer: [UInt8] = []
    private var readOffset = 0

    public init(endpoint: HTTPEndpoint, timeout: Duration = .seconds(10), maximumResponseBytes: Int = 16 << 20) {
        self.endpoint = endpoint
        self.timeout = timeout
        self.maximumResponseBytes = maximumResponseBytes
    }

    /// A client for `url` (`http://host[:port]`).
    public convenience init(url: String, timeout: Duration = .seconds(10)) throws(HTTPClientError) {
        self.init(endpoint: try HTTPEndpoint(url: url), timeout: timeout)
    }

    /// Drops the kept-alive connection, if any.
    public func close() {
        connection = nil
    }

    /// Sends one request and returns the complete response.
    ///
    /// `Host`, `Content-Length` (whenever there is a body or the method usually carries one)
    /// and `User-Agent` are added unless given; a caller's `Content-Length` or
    /// `Transfer-Encoding` is refused, since the client frames the body itself.
    public func request(method: String = "GET", path: String, headers: [(name: String, value: String)] = [],
                        body: [UInt8]? = nil) throws(HTTPClientError) -> HTTPClientResponse {
        let message = try Self.serialize(method: method, path: path, headers: headers, body: body,
                                         hostHeader: endpoint.hostHeader)
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var retried = false
        while true {
            let reused: Bool
            let current: TCPConnection
            if let open = connection, open.isReusable {
                current = open
                reused = true
            } else {
                connection = nil
                current = try TCPConnection(ipv4: endpoint.ipv4, port: endpoint.port, deadline: deadline)
                connectionsOpened += 1
                connection = current
                reused = false
            }
            buffer.removeAll(keepingCapacity: true)
            readOffset = 0
            var sent = false
            do {
                try current.send(message, deadline: deadline)
                sent = true
                let (response, keepAlive) = try readResponse(from: current, method: method, deadline: deadline)
                if !keepAlive || readOffset != buffer.count { connection = nil }
                return response
            } catch {
                connection = nil
                if reused && !retried && error == .connectionClosed && buffer.isEmpty
                    && (!sent || Self.idempotentMethods.contains(method)) {
                    retried = true
                    continue
                }
                throw error
            }
        }
    }

    /// Sends `bytes` exactly as given (a malformed or smuggling request, in tests) on the
    /// kept-alive connection or a new one; `readResponse` then reads the answer.
    public func send(raw bytes: [UInt8]) throws(HTTPClientError) {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let current: TCPConnection
        if let open = connection, open.isReusable {
            current = open
        } else {
            current = try TCPConnection(ipv4: endpoint.ipv4, port: endpoint.port, deadline: deadline)
            connectionsOpened += 1
            connection = current
            buffer.removeAll(keepingCapacity: true)
            readOffset = 0
        }
        try current.send(bytes, deadline: deadline)
    }

    /// Reads one response on the current connection (after `send(raw:)`).
    public func readResponse(method: String = "GET") throws(HTTPClientError) -> HTTPClientResponse {
        guard let current = connection else { throw .connectionClosed }
        let deadline = ContinuousClock.now.advanced(by: timeout)
        do {
            let (response, keepAlive) = try readResponse(from: current, method: method, deadline: deadline)
            if !keepAlive { connection = nil }
            return response
        } catch {
            connection = nil
            throw error
        }
    }

    // MARK: - Request

    private static let idempotentMethods: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"]
    private static let bodyMethods: Set<String> = ["POST", "PUT", "PATCH"]
    private static let framingHeaders: Set<String> = ["content-length", "transfer-encoding"]

    static func serialize(method: String, path: String, headers: [(name: String, value: String)],
                          body: [UInt8]?, hostHeader: String) throws(HTTPClientError) -> [UInt8] {
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else {
            throw .invalidRequest("method \(method) is not an HTTP token")
        }
        guard path.hasPrefix("/"), path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidRequest("target must start with / and hold visible ASCII only")
        }
        var head = "\(method) \(path) HTTP/1.1\r\n"
        var hasHost = false
        var hasUserAgent = false
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw .invalidRequest("header name \(name) is not an HTTP token")
            }
            guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw .invalidRequest("header \(name) has a control character in its value")
            }
            let lowered = name.lowercased()
            guard !framingHeaders.contains(lowered) else {
                throw .invalidRequest("\(name) is set by the client from the body")
            }
            hasHost = hasHost || lowered == "host"
            hasUserAgent = hasUserAgent || lowered == "user-agent"
            head += "\(name): \(value)\r\n"
        }
        if !hasHost { head += "Host: \(hostHeader)\r\n" }
        if !hasUserAgent { head += "User-Agent: attestgate-device\r\n" }
        if body != nil || bodyMethods.contains(method) {
            head += "Content-Length: \(body?.count ?? 0)\r\n"
        }
        head += "\r\n"
        var message = Array(head.utf8)
        if let body { message.append(contentsOf: body) }
        return message
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    // MARK: - Response

    private func readResponse(from connection: TCPConnection, method: String,
                              deadline: ContinuousClock.Instant) throws(HTTPClientError) -> (HTTPClientResponse, Bool) {
        while true {
            let head = try readHead(from: connection, deadline: deadline)
            // Interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100..<200).contains(head.status) && head.status != 101 { continue }
            let response: HTTPClientResponse
            if method == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: [])
            } else if let codings = head.transferEncoding {
                guard codings.last == "chunked" else {
                    // Not chunked last: the body runs to the end of the connection (RFC 9112 §6.3).
                    let body = try readToEnd(from: connection, deadline: deadline)
                    return (HTTPClientResponse(status: head.status, headers: head.headers, body: body), false)
                }
                let body = try readChunkedBody(from: connection, deadline: deadline)
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: body)
            } else if let length = head.contentLength {
                guard length <= maximumResponseBytes else { throw .responseTooLarge(limit: maximumResponseBytes) }
                try fill(length, from: connection, deadline: deadline)
                let body = Array(buffer[readOffset..<(readOffset + length)])
                readOffset += length
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: body)
            } else {
                let body = try readToEnd(from: connection, deadline: deadline)
                return (HTTPClientResponse(status: head.status, headers: head.headers, body: body), false)
            }
            return (response, head.keepAlive)
        }
    }

    private struct Head {
        var status: Int
        var headers: [(name: String, value: String)]
        var keepAlive: Bool
        var contentLength: Int?
        var transferEncoding: [String]?
    }

    private static let crlf: [UInt8] = [0x0D, 0x0A]
    private static let headTerminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]

    private func readHead(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Head {
        let end = try readUntil(Self.headTerminator, limit: min(maximumResponseBytes, 64 * 1024),
                                from: connection, deadline: deadline)
        let text = String(decoding: buffer[readOffset..<end], as: UTF8.self)
        readOffset = end + Self.headTerminator.count
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[0].count == 8,
              parts[1].count == 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(parts[1]) else {
            throw .malformedResponse("status line \(statusLine.prefix(80))")
        }
        var head = Head(status: status, headers: [], keepAlive: parts[0] == "HTTP/1.1")
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                  !line.first!.isWhitespace else {
                throw .malformedResponse("header line \(line.prefix(80))")
            }
            let name = String(line[..<colon])
            let value = String(line[line.index(after: colon)...].trimmingSpacesAndTabs())
            head.headers.append((name, value))
            switch name.lowercased() {
            case "content-length":
                guard !value.isEmpty, value.allSatisfy({ $0.isASCII && $0.isNumber }), let length = Int(value),
                      head.contentLength == nil || head.contentLength == length else {
                    throw .malformedResponse("Content-Length \(value)")
                }
                head.contentLength = length
            case "transfer-encoding":
                let codings = value.lowercased().split(separator: ",").map { String($0.trimmingSpacesAndTabs()) }
                head.transferEncoding = (head.transferEncoding ?? []) + codings
            case "connection":
                let options = value.lowercased().split(separator: ",").map { $0.trimmingSpacesAndTabs() }
                if options.contains("close") { head.keepAlive = false }
                if options.contains("keep-alive") && parts[0] == "HTTP/1.0" { head.keepAlive = true }
            default:
                break
            }
        }
        return head
    }

    private func readChunkedBody(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> [UInt8] {
        var body = [UInt8]()
        while true {
            let lineEnd = try readUntil(Self.crlf, limit: 1024, from: connection, deadline: deadline)
            let line = String(decoding: buffer[readOffset..<lineEnd], as: UTF8.self)
            readOffset = lineEnd + 2
            let sizeText = line.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
                .trimmingSpacesAndTabs()
            guard !sizeText.isEmpty, sizeText.count <= 15, sizeText.allSatisfy(\.isHexDigit),
                  let size = Int(sizeText, radix: 16) else {
                throw .malformedResponse("chunk size \(line.prefix(40))")
            }
            if size == 0 { break }
            guard body.count + size <= maximumResponseBytes else { throw .responseTooLarge(limit: maximumResponseBytes) }
            try fill(size + 2, from: connection, deadline: deadline)
            body.append(contentsOf: buffer[readOffset..<(readOffset + size)])
            guard buffer[readOffset + size] == 0x0D, buffer[readOffset + size + 1] == 0x0A else {
                throw .malformedResponse("chunk not followed by CRLF")
            }
            readOffset += size + 2
        }
        // Trailer fields, ignored, up to the empty line.
        while true {
            let lineEnd = try readUntil(Self.crlf, limit: 8 * 1024, from: connection, deadline: deadline)
            let empty = lineEnd == readOffset
            readOffset = lineEnd + 2
            if empty { return body }
        }
    }

    private func readToEnd(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> [UInt8] {
        while try connection.receive(into: &buffer, deadline: deadline) > 0 {
            guard buffer.count - readOffset <= maximumResponseBytes else {
                throw .responseTooLarge(limit: maximumResponseBytes)
            }
        }
        defer { readOffset = buffer.count }
        return Array(buffer[readOffset...])
    }

    /// Reads until `count` unread bytes are buffered.
    private func fill(_ count: Int, from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) {
        while buffer.count - readOffset < count {
            guard try connection.receive(into: &buffer, deadline: deadline) > 0 else { throw .connectionClosed }
        }
    }

    /// Reads until `marker` appears among the unread bytes within `limit` bytes; returns its index.
    private func readUntil(_ marker: [UInt8], limit: Int, from connection: TCPConnection,
                           deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Int {
        var searchFrom = readOffset
        while true {
            if buffer.count - searchFrom >= marker.count {
                var index = searchFrom
                while index <= buffer.count - marker.count {
                    if buffer[index] == marker[0] && buffer[index..<(index + marker.count)].elementsEqual(marker) {
                        return index
                    }
                    index += 1
                }
                searchFrom = buffer.count - marker.count + 1
            }
            guard buffer.count - readOffset <= limit else { throw .responseTooLarge(limit: limit) }
            guard try connection.receive(into: &buffer, deadline: deadline) > 0 else { throw .connectionClosed }
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP optional whitespace).
    func trimmingSpacesAndTabs() -> SubSequence {
        var text = self[...]
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
