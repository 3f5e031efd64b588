internal import CEvent

/// Why reading a request body failed.
public enum HTTPBodyError: Error, Sendable, Equatable {
    /// The body exceeds the limit given by the handler (answer 413).
    case tooLarge
    /// The body's framing is broken (answer 400).
    case malformed(String)
    /// The client went away before the body was complete.
    case incomplete
}

/// One request on a server connection, and the way to answer it.
///
/// Loop thread only. A handler must answer exactly once; answering twice is ignored.
public final class HTTPServerRequest {
    public let head: HTTPRequestHead
    public let remoteAddress: String
    public let framing: BodyFraming
    /// Monotonic time the head was parsed, for latency and access logs.
    public let startedAt: ContinuousClock.Instant
    public internal(set) var keepAlive: Bool
    /// Set once a response has been started.
    public private(set) var responseStarted = false
    public private(set) var responseStatus = 0
    /// Bytes of response body written so far.
    public private(set) var responseBodyBytes = 0
    /// Called once if the client disconnects before the response is complete.
    public var onAbort: (() -> Void)?
    /// Called when a streamed response's output has drained (backpressure release).
    var onWritable: (() -> Void)?

    weak var connection: HTTPServerConnection?
    var decoder: BodyDecoder
    var bodyConsumer: BodyConsumer = .none
    var streamingResponse = false
    var responseChunked = false
    var finished = false
    var expectContinuePending: Bool

    enum BodyConsumer {
        case none
        case collect(limit: Int, buffer: OpaquePointer, completion: (Result<[UInt8], HTTPBodyError>) -> Void)
        case stream(onData: (OpaquePointer) -> Void, onEnd: (Result<Void, HTTPBodyError>) -> Void)
        case done
    }

    init(connection: HTTPServerConnection, head: HTTPRequestHead, framing: BodyFraming, remoteAddress: String) {
        self.connection = connection
        self.head = head
        self.framing = framing
        self.remoteAddress = remoteAddress
        self.startedAt = .now
        self.decoder = BodyDecoder(framing)
        let connectionTokens = head.headers
        if head.versionMinor >= 1 {
            keepAlive = !connectionTokens.containsToken("close", in: "Connection")
        } else {
            keepAlive = connectionTokens.containsToken("keep-alive", in: "Connection")
        }
        expectContinuePending = head.versionMinor >= 1 && head.headers["Expect"]?.equalsIgnoringASCIICase("100-continue") == true
    }

    public var method: String { head.method }
    public var path: Substring { head.path }
    public var headers: HTTPHeaders { head.headers }

    /// Reads the whole body, up to `limit` bytes, then calls `completion` on the loop thread.
    public func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void) {
        if case .length(let length) = framing, length > limit {
            completion(.failure(.tooLarge))
            return
        }
        guard case .none = bodyConsumer else { return }
        bodyConsumer = .collect(limit: limit, buffer: evbuffer_new(), completion: completion)
        connection?.pumpBody()
    }

    /// Streams the body: `onData` gets a buffer to drain, `onEnd` the outcome. Used by the proxy.
    func streamBody(onData: @escaping (OpaquePointer) -> Void, onEnd: @escaping (Result<Void, HTTPBodyError>) -> Void) {
        guard case .none = bodyConsumer else { return }
        bodyConsumer = .stream(onData: onData, onEnd: onEnd)
        connection?.pumpBody()
    }

    /// Stops and restarts body delivery (backpressure from the upstream).
    var bodyPaused = false {
        didSet { if !bodyPaused { connection?.pumpBody() } }
    }

    /// Answers with a complete response. `Content-Length` and `Connection` are set here.
    public func respond(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        guard !responseStarted, let connection else { return }
        responseStarted = true
        responseStatus = status
        let hasBody = method != "HEAD" && status != 204 && status != 304
        var head = statusLine(status)
        for field in headers.fields {
            head += field.name
            head += ": "
            head += field.value
            head += "\r\n"
        }
        if status != 204 && !(100..<200).contains(status) {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += keepAlive && !connection.closeAfterResponse ? "" : "Connection: close\r\n"
        head += "\r\n"
        let output = connection.output
        evbuffer_add_string(output, head)
        if hasBody {
            evbuffer_add_bytes(output, body)
            responseBodyBytes = body.count
        }
        connection.responseFinished(self)
    }

    /// Starts a streamed response; `contentLength` nil means chunked (HTTP/1.1) or close-delimited.
    func startResponse(status: Int, reason: String?, headers: HTTPHeaders, contentLength: Int?) {
        guard !responseStarted, let connection else { return }
        responseStarted = true
        responseStatus = status
        streamingResponse = true
        var head = reason.map { "HTTP/1.1 \(status) \($0)\r\n" } ?? statusLine(status)
        for field in headers.fields {
            head += field.name
            head += ": "
            head += field.value
            head += "\r\n"
        }
        let bodyless = method == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status)
        if let contentLength {
            head += "Content-Length: \(contentLength)\r\n"
        } else if !bodyless {
            if self.head.versionMinor >= 1 {
                responseChunked = true
                head += "Transfer-Encoding: chunked\r\n"
            } else {
                keepAlive = false
            }
        }
        head += keepAlive && !connection.closeAfterResponse ? "" : "Connection: close\r\n"
        head += "\r\n"
        evbuffer_add_string(connection.output, head)
        connection.flushOutput()
    }

    /// Appends streamed body bytes, draining `buffer`.
    func writeBody(_ buffer: OpaquePointer) {
        guard let connection, streamingResponse, !finished else { return }
        responseBodyBytes += evbuffer_get_length(buffer)
        if responseChunked {
            ChunkedEncoder.writeChunk(from: buffer, to: connection.output)
        } else {
            evbuffer_add_buffer(connection.output, buffer)
        }
        connection.flushOutput()
    }

    /// Bytes waiting to be written to the client.
    var pendingOutput: Int { connection.map { evbuffer_get_length($0.output) } ?? 0 }

    /// Ends a streamed response. `complete: false` means the body was cut short: close.
    func endResponse(complete: Bool) {
        guard let connection, streamingResponse, !finished else { return }
        if !complete {
            connection.closeAfterResponse = true
        } else if responseChunked {
            ChunkedEncoder.writeEnd(to: connection.output)
        }
        connection.responseFinished(self)
    }

    func fail(body error: HTTPBodyError) {
        switch bodyConsumer {
        case .collect(_, let buffer, let completion):
            bodyConsumer = .done
            evbuffer_free(buffer)
            completion(.failure(error))
        case .stream(_, let onEnd):
            bodyConsumer = .done
            onEnd(.failure(error))
        case .none, .done:
            break
        }
    }

    deinit {
        if case .collect(_, let buffer, _) = bodyConsumer { evbuffer_free(buffer) }
    }

    private func statusLine(_ status: Int) -> String {
        "HTTP/1.1 \(status) \(HTTPStatus.reason(status))\r\n"
    }
}

/// Reason phrases for the statuses the gateway produces itself.
public enum HTTPStatus {
    public static func reason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }
}
