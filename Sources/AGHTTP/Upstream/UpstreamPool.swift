internal import CEvent
public import AGEventLoop

/// Keep-alive HTTP/1.1 connections to upstreams, and the forwarding of requests over them.
///
/// One pool per worker event loop; loop thread only. Idle connections are kept per upstream
/// address and reused most-recent first, so a steady load runs on few warm connections and
/// the rarely used ones expire.
public final class UpstreamPool {
    let loop: EventLoop
    let configuration: UpstreamPoolConfiguration
    private var idle: [UpstreamAddress: [UpstreamConnection]] = [:]
    /// Decoded response bytes pass through here on their way to the client; always left empty.
    let scratch: OpaquePointer
    /// Request heads are built here; its buffer is reused from request to request.
    private var headWriter = HTTPHeadWriter(capacity: 2048)
    /// Response heads are copied here to be parsed; reused once the last head has been let go.
    private var responseHead: [UInt8] = []

    /// Connections currently open (connecting, serving or idle).
    public private(set) var openConnectionCount = 0

    public init(loop: EventLoop, configuration: UpstreamPoolConfiguration = UpstreamPoolConfiguration()) {
        self.loop = loop
        self.configuration = configuration
        scratch = evbuffer_new()
    }

    deinit {
        closeIdleConnections()
        evbuffer_free(scratch)
    }

    /// Idle connections waiting in the pool for `target`.
    public func idleConnectionCount(for target: UpstreamTarget) -> Int {
        idle[target.address]?.count ?? 0
    }

    /// Closes every idle connection (shutdown, or an upstream's address went away).
    public func closeIdleConnections() {
        let all = idle.values.flatMap { $0 }
        idle.removeAll()
        for connection in all { connection.close() }
    }

    /// Forwards `request` to `target` and streams the response back to the client.
    ///
    /// The head sent upstream is built in one buffer and written in one piece: the request
    /// line (`target.basePath` + the client's target, as received), the fields `writeFields`
    /// appends, `Host` when it wrote none, and the pool's own framing.
    ///
    /// - Parameters:
    ///   - writeFields: Appends the header fields to send, in order. The pool owns framing:
    ///     it never forwards `Content-Length`, `Transfer-Encoding`, `Connection` or `Expect`
    ///     itself, and `writeFields` must not write them either (`HTTPFieldName.isHopControl`).
    ///   - maxBodyBytes: Largest request body accepted. A larger `Content-Length` fails at
    ///     once, before connecting; a chunked body fails when it crosses the limit.
    ///   - responseFields: Writes the response fields the client gets, from the upstream's
    ///     head (the gateway drops hop-by-hop fields and adds its own); it must not write
    ///     framing fields or `Connection`, which the server writes. When nil, every field but
    ///     those is relayed.
    ///   - completion: Called exactly once, on the loop thread, with how it ended. On
    ///     `.failed`, nothing has been sent to the client and the caller answers.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        writeFields: (inout HTTPHeadWriter) -> Void,
                        responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)? = nil,
                        completion: @escaping (UpstreamOutcome) -> Void) {
        if case .length(let length) = request.framing, length > maxBodyBytes {
            completion(.failed(.bodyTooLarge))
            return
        }
        headWriter.reset()
        UpstreamRequestHead.write(into: &headWriter, method: request.method, framing: request.framing,
                                  defaultHost: target.hostHeader, target: { writer in
            writer.append(target.basePath)
            writer.append(request.head.headers.storage[request.head.targetRange])
        }, fields: writeFields)
        let exchange = UpstreamExchange(pool: self, request: request, address: target.address, head: headWriter.bytes,
                                        timeouts: timeouts, maxBodyBytes: maxBodyBytes,
                                        responseFields: responseFields, completion: completion)
        exchange.start()
    }

    /// Forwards with string fields and an explicit target (`path`, base path included): the
    /// convenient form for tools and tests. Framing, `Connection` and `Expect` in `headers`
    /// are dropped.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget, path: String, headers: HTTPHeaders,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)? = nil,
                        completion: @escaping (UpstreamOutcome) -> Void) {
        if case .length(let length) = request.framing, length > maxBodyBytes {
            completion(.failed(.bodyTooLarge))
            return
        }
        let head = UpstreamRequestHead.render(method: request.method, path: path, headers: headers,
                                              framing: request.framing, defaultHost: target.hostHeader)
        let exchange = UpstreamExchange(pool: self, request: request, address: target.address, head: Array(head.utf8),
                                        timeouts: timeouts, maxBodyBytes: maxBodyBytes,
                                        responseFields: responseFields, completion: completion)
        exchange.start()
    }

    /// The first `length` bytes of `input`, in the reused response-head buffer.
    func responseHeadBytes(from input: OpaquePointer, length: Int) -> [UInt8] {
        responseHead.removeAll(keepingCapacity: true)
        responseHead.append(contentsOf: UnsafeRawBufferPointer(start: evbuffer_pullup(input, length), count: length))
        return responseHead
    }

    // MARK: Connection bookkeeping

    func takeIdle(_ address: UpstreamAddress) -> UpstreamConnection? {
        idle[address]?.popLast()
    }

    /// Parks a connection after a complete, reusable exchange; beyond the limit the oldest goes.
    func release(_ connection: UpstreamConnection) {
        guard connection.isOpen else { return }
        connection.becomeIdle(timeout: configuration.idleTimeout)
        var evicted: UpstreamConnection?
        idle[connection.address, default: []].append(connection)
        if let count = idle[connection.address]?.count, count > configuration.maxIdlePerTarget {
            evicted = idle[connection.address]?.removeFirst()
        }
        evicted?.close()
    }

    /// Drops an idle connection the upstream closed, wrote to, or that expired.
    func discardIdle(_ connection: UpstreamConnection) {
        idle[connection.address]?.removeAll { $0 === connection }
        connection.close()
    }

    func connectionOpened() {
        openConnectionCount += 1
    }

    func connectionClosed() {
        openConnectionCount -= 1
    }
}

/// The request head sent upstream.
enum UpstreamRequestHead {
    /// Writes the request line, the caller's fields, `Host` if they had none, the framing and
    /// the blank line.
    static func write(into writer: inout HTTPHeadWriter, method: String, framing: BodyFraming, defaultHost: String,
                      target: (inout HTTPHeadWriter) -> Void, fields: (inout HTTPHeadWriter) -> Void) {
        writer.append(method)
        writer.append(" ")
        target(&writer)
        writer.append(" HTTP/1.1\r\n")
        fields(&writer)
        if !writer.wroteHost { writer.appendField(.host, defaultHost) }
        switch framing {
        case .length(let length):
            writer.appendFieldName(.contentLength)
            writer.append(decimal: length)
            writer.appendCRLF()
        case .chunked:
            writer.appendField(.transferEncoding, "chunked")
        case .none, .untilClose:
            // Methods whose body has meaning say so even when it is empty (RFC 9110 8.6).
            if method == "POST" || method == "PUT" || method == "PATCH" { writer.appendField(.contentLength, "0") }
        }
        writer.appendCRLF()
    }

    /// The head for string fields, without the framing and connection fields among them.
    static func render(method: String, path: String, headers: HTTPHeaders, framing: BodyFraming,
                       defaultHost: String) -> String {
        var writer = HTTPHeadWriter()
        write(into: &writer, method: method, framing: framing, defaultHost: defaultHost, target: { $0.append(path) }) { writer in
            for field in headers.fields {
                switch HTTPFieldName(field.name) {
                case .expect, .connection, .contentLength, .transferEncoding: continue
                default: writer.appendField(field.name, field.value)
                }
            }
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
