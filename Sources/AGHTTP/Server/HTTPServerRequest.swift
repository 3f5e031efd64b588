internal import CEvent

/// Why reading a request body failed.
public enum HTTPBodyError: Error, Sendable, Equatable {
    /// The body exceeds the limit given by the handler (answer 413).
    case tooLarge
    /// The body's framing is broken (answer 400).
    case malformed(String)
    /// The client went away before the body was complete (or sent it too slowly).
    case incomplete
}

/// One request on a server connection, and the way to answer it.
///
/// Loop thread only. A handler must answer exactly once; answering twice is ignored.
public final class HTTPServerRequest {
    public let head: HTTPRequestHead
    public let remoteAddress: String
    /// Arrived over TLS.
    public let isSecure: Bool
    public let framing: BodyFraming
    /// Monotonic time the head was parsed, for latency and access logs.
    public let startedAt: ContinuousClock.Instant
    /// The connection may carry another request after this one; false once the client asked
    /// to close, the body could not be read in full, or the server is shutting down.
    public internal(set) var keepAlive: Bool
    /// Set when the server answers on its own (parse error, timeout): the reply's reason.
    public let localError: HTTPLocalError?
    /// Called once if the client disconnects before the response is complete.
    public var onAbort: (() -> Void)?
    /// Called when a streamed response's output has drained (backpressure release).
    var onWritable: (() -> Void)?

    /// The connection, while this is its current request: the connection sets it to nil when
    /// the request stops being current (answered, or the connection closed or freed), so a
    /// handler that outlives either writes nothing. Unowned rather than weak: a weak reference
    /// gives the connection a side table, which sends every retain and release of it down the
    /// runtime's slow path (~800 instructions per proxied request, callgrind).
    unowned var connection: HTTPServerConnection?
    var decoder: BodyDecoder
    var bodyConsumer: BodyConsumer = .none
    /// Why the body can no longer be read, when that was settled before anyone asked for it.
    private var bodyFailure: HTTPBodyError?
    var response = ResponseState.notStarted
    /// The streamed answer has neither a length nor chunked coding (an HTTP/1.0 client's): only
    /// the connection's end ends its body, so a cut one ends with a reset (`endAbortively`).
    private(set) var endsWithConnection = false
    /// A `100 Continue` is owed before the body is read (`Expect: 100-continue`).
    var expectContinuePending: Bool

    enum ResponseState: Equatable {
        case notStarted
        case streaming(chunked: Bool)
        /// Fully queued, or abandoned because the connection closed.
        case complete
    }

    enum BodyConsumer {
        case none
        case collect(limit: Int, buffer: OpaquePointer, completion: (Result<[UInt8], HTTPBodyError>) -> Void)
        case stream(onData: (OpaquePointer) -> Void, onEnd: (Result<Void, HTTPBodyError>) -> Void)
        case done
    }

    init(connection: HTTPServerConnection, head: HTTPRequestHead, framing: BodyFraming, remoteAddress: String,
         localError: HTTPLocalError? = nil) {
        self.connection = connection
        self.isSecure = connection.isSecure
        self.framing = framing
        self.remoteAddress = remoteAddress
        self.localError = localError
        self.startedAt = .now
        self.decoder = BodyDecoder(framing)
        if localError != nil {
            keepAlive = false
        } else if head.versionMinor >= 1 {
            keepAlive = !head.headers.containsToken("close", in: .connection)
        } else {
            keepAlive = head.headers.containsToken("keep-alive", in: .connection)
        }
        expectContinuePending = head.versionMinor >= 1
            && head.headers.contains { $0.name == .expect && head.headers.value(of: $0, equalsIgnoringCase: "100-continue") }
        // Stored last, when nothing reads the parameter any more: the head moves in instead of
        // being copied (its four references retained here and released on return).
        self.head = head
    }

    public var method: String { head.method }
    /// The path part of the target, found once (routers, handlers and the access log each ask).
    public private(set) lazy var path: Substring = head.path
    public var headers: HTTPFields { head.headers }
    /// A response has been started.
    public var responseStarted: Bool { response != .notStarted }
    var finished: Bool { response == .complete }
    /// The request can no longer be answered: answered already, or its connection closed (the
    /// client left, or closed its side with part of the request unread) before the handler did.
    public var isFinished: Bool { finished }

    /// Reads the whole body, up to `limit` bytes, then calls `completion` on the loop thread.
    public func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void) {
        if let bodyFailure {
            completion(.failure(bodyFailure))
            return
        }
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
        if let bodyFailure {
            onEnd(.failure(bodyFailure))
            return
        }
        guard case .none = bodyConsumer else { return }
        bodyConsumer = .stream(onData: onData, onEnd: onEnd)
        connection?.pumpBody()
    }

    /// Stops and restarts body delivery (backpressure from the upstream).
    var bodyPaused = false {
        didSet { if !bodyPaused { connection?.pumpBody() } }
    }

    /// Answers with a complete response. `Content-Length`, `Connection` and `Date` (unless
    /// `headers` has one) are set here.
    public func respond(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        respond(status: status, body: body) { writer in
            for field in headers.fields { writer.appendField(field.name, field.value) }
        }
    }

    /// The same, with the header fields written by `fields` straight into the head (the
    /// gateway's own answers: no `HTTPHeaders` and no `String` per value on the way).
    public func respond(status: Int, body: [UInt8], fields: (inout HTTPHeadWriter) -> Void) {
        guard response == .notStarted, let connection else { return }
        response = .complete
        // An answer before the body was read: unless the rest has already arrived, the
        // connection closes after it, and says so.
        if keepAlive, !connection.discardArrivedBody(self) { keepAlive = false }
        let hasBody = method != "HEAD" && status != 204 && status != 304
        connection.writeHead { writer in
            writer.appendStatusLine(status)
            fields(&writer)
            if !writer.wroteDate { connection.server.appendDate(to: &writer) }
            if status != 204 && !(100..<200).contains(status) {
                writer.appendFieldName(.contentLength)
                writer.append(decimal: body.count)
                writer.appendCRLF()
            }
            appendConnection(to: &writer)
            writer.appendCRLF()
        }
        if hasBody { connection.appendBody(body) }
        connection.responseFinished(self)
    }

    /// Starts a streamed response; `contentLength` nil means chunked (HTTP/1.1) or
    /// close-delimited. `reason` is relayed when given (already checked clean), else RFC
    /// 9110's phrase is written; `fields` writes the header fields (the server's `Date` follows
    /// unless they hold one). The head is queued, not
    /// written: the caller adds what body it has and then calls `flushResponse()`, so a head and
    /// a small body leave in one write.
    func startResponse(status: Int, reason: ArraySlice<UInt8>?, contentLength: Int?, fields: (inout HTTPHeadWriter) -> Void) {
        guard response == .notStarted, let connection else { return }
        // An answer that starts before the request's body was read in full (an upstream's early
        // answer): the connection will not carry another request, so the head says so, as
        // `respond` does (an independent sweep saw keep-alive clients — HTTP/1.0 ones told
        // `Connection: keep-alive` — lose the request they sent next).
        if keepAlive, !decoder.isDone { keepAlive = false }
        let bodyless = method == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status)
        var chunked = false
        if contentLength == nil, !bodyless {
            if head.versionMinor >= 1 {
                chunked = true
            } else {
                keepAlive = false
                endsWithConnection = true
            }
        }
        response = .streaming(chunked: chunked)
        connection.writeHead { writer in
            if let reason {
                writer.append("HTTP/1.1 ")
                writer.append(decimal: status)
                writer.append(" ")
                writer.append(reason)
                writer.appendCRLF()
            } else {
                writer.appendStatusLine(status)
            }
            fields(&writer)
            // The upstream's own Date is relayed as it is; a response without one gets ours.
            if !writer.wroteDate { connection.server.appendDate(to: &writer) }
            if let contentLength {
                writer.appendFieldName(.contentLength)
                writer.append(decimal: contentLength)
                writer.appendCRLF()
            } else if chunked {
                writer.appendField(.transferEncoding, "chunked")
            }
            appendConnection(to: &writer)
            writer.appendCRLF()
        }
    }

    /// `Connection: close` when the connection closes after this answer; `Connection:
    /// keep-alive` when an HTTP/1.0 client's stays open (HTTP/1.0 closes unless told otherwise,
    /// RFC 9112 section 9.3 and appendix C.2.2).
    private func appendConnection(to writer: inout HTTPHeadWriter) {
        if !keepAlive {
            writer.appendField(.connection, "close")
        } else if head.versionMinor == 0 {
            writer.appendField(.connection, "keep-alive")
        }
    }

    /// Writes whatever of the response is queued (see `startResponse`).
    func flushResponse() {
        connection?.flushOutput()
    }

    /// Appends streamed body bytes, draining `buffer`.
    func writeBody(_ buffer: OpaquePointer) {
        guard let connection, case .streaming(let chunked) = response else { return }
        if chunked {
            ChunkedEncoder.writeChunk(from: buffer, to: connection.output)
        } else {
            connection.appendBody(buffer)
        }
        connection.flushOutput()
    }

    /// Appends streamed body bytes from memory (not for a chunked response: `streamsChunked`).
    func writeBody(_ bytes: UnsafeRawBufferPointer) {
        guard let connection, case .streaming(chunked: false) = response else { return }
        connection.appendBody(bytes)
        connection.flushOutput()
    }

    /// The streamed response is being chunk-encoded: its body goes through `writeBody(_:)`
    /// from a buffer.
    var streamsChunked: Bool { response == .streaming(chunked: true) }

    /// Bytes waiting to be written to the client.
    var pendingOutput: Int { connection.map { evbuffer_get_length($0.output) } ?? 0 }

    /// Ends a streamed response. `complete: false` means the body was cut short: close.
    func endResponse(complete: Bool) {
        guard let connection, case .streaming(let chunked) = response else { return }
        response = .complete
        if !complete {
            keepAlive = false
            // A body that ends with the connection: a cut one must not end the way a whole one
            // does (RFC 9112 section 9.8). A chunked or length-framed copy shows the cut itself.
            if endsWithConnection { connection.endAbortively() }
        } else if chunked {
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
        case .none:
            // Nobody reads the body yet (a handler still waiting on Redis): whoever asks for it
            // later learns at once that it will never come.
            bodyFailure = error
        case .done:
            break
        }
    }

    deinit {
        if case .collect(_, let buffer, _) = bodyConsumer { evbuffer_free(buffer) }
    }
}
