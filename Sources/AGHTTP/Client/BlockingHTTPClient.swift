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

    var connection: TCPConnection?
    var buffer: [UInt8] = []
    var readOffset = 0

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
            let (current, reused) = try freshExchange(deadline: deadline)
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

    /// Sends one request and returns without reading the answer, for a caller that waits on
    /// several clients' `descriptor`s at once (a load generator) and then reads the answer of a
    /// ready one with `readResponse(method:)`. Uses the kept-alive connection when it is still
    /// reusable, a new one otherwise; nothing is sent twice.
    public func send(method: String = "GET", path: String, headers: [(name: String, value: String)] = [],
                     body: [UInt8]? = nil) throws(HTTPClientError) {
        let message = try Self.serialize(method: method, path: path, headers: headers, body: body,
                                         hostHeader: endpoint.hostHeader)
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let (current, _) = try freshExchange(deadline: deadline)
        do {
            try current.send(message, deadline: deadline)
        } catch {
            connection = nil
            throw error
        }
    }

    /// The kept-alive connection when it is still reusable, else a new one; the read buffer
    /// emptied for the answer to come. `reused` says which.
    private func freshExchange(deadline: ContinuousClock.Instant) throws(HTTPClientError) -> (connection: TCPConnection, reused: Bool) {
        let current: TCPConnection
        let reused: Bool
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
        return (current, reused)
    }

    /// The open connection's socket (to wait on with `poll`), nil when none is open.
    public var descriptor: Int32? { connection?.descriptor }

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
            guard value.utf8.allSatisfy(HTTPHeadParser.isFieldValueByte) else {
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
