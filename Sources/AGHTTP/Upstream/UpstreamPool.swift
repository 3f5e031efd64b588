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
    /// - Parameters:
    ///   - path: The request target to send (base path already prefixed, query included).
    ///   - headers: The header fields to send, in order. The pool owns the framing and
    ///     connection fields: `Content-Length`, `Transfer-Encoding`, `Connection` and `Expect`
    ///     given here are dropped and the pool writes its own; `Host` is added when absent.
    ///   - maxBodyBytes: Largest request body accepted. A larger `Content-Length` fails at
    ///     once, before connecting; a chunked body fails when it crosses the limit.
    ///   - responseHeaderFilter: Edits the response fields before they reach the client (the
    ///     gateway removes hop-by-hop fields); framing fields are already gone.
    ///   - completion: Called exactly once, on the loop thread, with how it ended. On
    ///     `.failed`, nothing has been sent to the client and the caller answers.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget, path: String, headers: HTTPHeaders,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        responseHeaderFilter: ((inout HTTPHeaders) -> Void)? = nil,
                        completion: @escaping (UpstreamOutcome) -> Void) {
        if case .length(let length) = request.framing, length > maxBodyBytes {
            completion(.failed(.bodyTooLarge))
            return
        }
        let head = UpstreamRequestHead.render(method: request.method, path: path, headers: headers,
                                              framing: request.framing, defaultHost: target.hostHeader)
        let exchange = UpstreamExchange(pool: self, request: request, address: target.address, head: head,
                                        timeouts: timeouts, maxBodyBytes: maxBodyBytes,
                                        responseHeaderFilter: responseHeaderFilter, completion: completion)
        exchange.start()
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

/// Renders the request head sent upstream, in one string.
enum UpstreamRequestHead {
    static func render(method: String, path: String, headers: HTTPHeaders, framing: BodyFraming,
                       defaultHost: String) -> String {
        var capacity = method.utf8.count + path.utf8.count + 64
        for field in headers.fields { capacity += field.name.utf8.count + field.value.utf8.count + 4 }
        var head = ""
        head.reserveCapacity(capacity)
        head += method
        head += " "
        head += path
        head += " HTTP/1.1\r\n"
        var hasHost = false
        for field in headers.fields {
            switch field.name.utf8.count {
            case 4:
                if field.name.equalsIgnoringASCIICase("Host") { hasHost = true }
            case 6:
                if field.name.equalsIgnoringASCIICase("Expect") { continue }
            case 10:
                if field.name.equalsIgnoringASCIICase("Connection") { continue }
            case 14:
                if field.name.equalsIgnoringASCIICase("Content-Length") { continue }
            case 17:
                if field.name.equalsIgnoringASCIICase("Transfer-Encoding") { continue }
            default:
                break
            }
            head += field.name
            head += ": "
            head += field.value
            head += "\r\n"
        }
        if !hasHost {
            head += "Host: "
            head += defaultHost
            head += "\r\n"
        }
        switch framing {
        case .length(let length):
            head += "Content-Length: "
            head += String(length)
            head += "\r\n"
        case .chunked:
            head += "Transfer-Encoding: chunked\r\n"
        case .none, .untilClose:
            // Methods whose body has meaning say so even when it is empty (RFC 9110 8.6).
            if method == "POST" || method == "PUT" || method == "PATCH" { head += "Content-Length: 0\r\n" }
        }
        head += "\r\n"
        return head
    }
}
