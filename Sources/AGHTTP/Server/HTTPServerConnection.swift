internal import CEvent
internal import AGEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// One client connection: parses request heads, feeds bodies, writes responses, keeps alive.
final class HTTPServerConnection {
    private unowned let server: HTTPServer
    private var bev: OpaquePointer?
    let remoteAddress: String
    let output: OpaquePointer
    private let input: OpaquePointer
    private var current: HTTPServerRequest?
    private var closeWhenDrained = false
    private var processing = false
    private var closed = false
    /// Set when the connection cannot be reused (unread body, broken framing, shutdown).
    var closeAfterResponse = false

    init(server: HTTPServer, fd: Int32, remoteAddress: String) {
        self.server = server
        self.remoteAddress = remoteAddress
        // Responses are written whole; Nagle would only delay a head and body sent apart.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let bev = bufferevent_socket_new(server.loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))!
        self.bev = bev
        self.input = bufferevent_get_input(bev)
        self.output = bufferevent_get_output(bev)
    }

    /// Reached without `close()` only when the server itself is dropped: the bufferevent must
    /// not outlive its callback context.
    deinit {
        if let bev { bufferevent_free(bev) }
    }

    func start() {
        guard let bev else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, context in
            Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue().readable()
        }, { _, context in
            Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue().writable()
        }, { _, events, context in
            Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue().event(events)
        }, context)
        bufferevent_setwatermark(bev, Int16(EV_READ), 0, server.configuration.readHighWatermark)
        setTimeouts(read: server.configuration.idleTimeout)
        // Writes go straight to the socket (`flushOutput`); EV_WRITE is only armed while a
        // write is left over, which saves two epoll_ctl calls per response.
        bufferevent_disable(bev, Int16(EV_WRITE))
        bufferevent_enable(bev, Int16(EV_READ))
    }

    /// Writes queued output to the socket now; arms EV_WRITE only for what the socket did not
    /// take (libevent then writes the rest and calls `writable` once drained). Write errors
    /// surface through the armed event, never here.
    func flushOutput() {
        guard let bev, evbuffer_get_length(output) > 0 else { return }
        if bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0 {
            _ = evbuffer_write(output, bufferevent_getfd(bev))
        }
        if evbuffer_get_length(output) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        }
    }

    private func setTimeouts(read: Duration?) {
        guard let bev else { return }
        var writeTV = timeval(server.configuration.writeTimeout)
        if let read {
            var readTV = timeval(read)
            bufferevent_set_timeouts(bev, &readTV, &writeTV)
        } else {
            bufferevent_set_timeouts(bev, nil, &writeTV)
        }
    }

    // MARK: Reading

    private func readable() {
        if let current {
            if !current.finished { pumpBody() }
            return
        }
        processInput()
    }

    /// Parses as many request heads as can be answered now (pipelined requests one at a time).
    private func processInput() {
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while current == nil, !closed, !closeWhenDrained, evbuffer_get_length(input) > 0 {
            guard parseHead() else { return }
        }
    }

    /// Returns false when more input is needed or the connection is closing.
    private func parseHead() -> Bool {
        let available = evbuffer_get_length(input)
        let maxHead = server.configuration.maxHeadBytes
        let found = "\r\n\r\n".withCString { evbuffer_search(input, $0, 4, nil) }
        if found.pos < 0 {
            if available > maxHead { reject(.headTooLarge) }
            if available > 0 { setTimeouts(read: server.configuration.readTimeout) }
            return false
        }
        let headLength = found.pos + 4
        guard headLength <= maxHead else {
            reject(.headTooLarge)
            return false
        }
        let bytes = UnsafeRawBufferPointer(start: evbuffer_pullup(input, headLength), count: headLength)
        let head: HTTPRequestHead
        let framing: BodyFraming
        do {
            head = try HTTPHeadParser.parseRequest(bytes)
            framing = try HTTPHeadParser.requestFraming(head.headers)
        } catch {
            evbuffer_drain(input, headLength)
            reject(error)
            return false
        }
        evbuffer_drain(input, headLength)
        let request = HTTPServerRequest(connection: self, head: head, framing: framing, remoteAddress: remoteAddress)
        if server.isShuttingDown { request.keepAlive = false }
        current = request
        setTimeouts(read: framing == .none ? nil : server.configuration.readTimeout)
        server.handler(request)
        return true
    }

    /// Answers a request that could not be parsed, then closes.
    private func reject(_ error: HTTPParseError) {
        closeAfterResponse = true
        let body = Array("{\"error\":\"\(error.message)\",\"code\":\"bad_request\"}".utf8)
        let head = "HTTP/1.1 \(error.status) \(HTTPStatus.reason(error.status))\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        evbuffer_add_string(output, head)
        evbuffer_add_bytes(output, body)
        closeWhenDrained = true
        bufferevent_disable(bev, Int16(EV_READ))
        flushOutput()
        if evbuffer_get_length(output) == 0 { close() }
    }

    /// Moves available body bytes to the request's consumer.
    func pumpBody() {
        guard let request = current, !request.bodyPaused else { return }
        if request.expectContinuePending, !request.decoder.isDone {
            request.expectContinuePending = false
            if !request.responseStarted {
                evbuffer_add_string(output, "HTTP/1.1 100 Continue\r\n\r\n")
                flushOutput()
            }
        }
        switch request.bodyConsumer {
        case .none, .done:
            return
        case .collect(let limit, let buffer, let completion):
            let result = request.decoder.decode(from: input, into: buffer, budget: limit + 1 - request.decoder.bytesDecoded)
            if request.decoder.bytesDecoded > limit {
                bodyBroken(request, .tooLarge)
                return
            }
            switch result {
            case .needMore:
                return
            case .malformed(let why):
                bodyBroken(request, .malformed(why))
            case .done:
                request.bodyConsumer = .done
                bodyComplete()
                let length = evbuffer_get_length(buffer)
                var body = [UInt8](repeating: 0, count: length)
                if length > 0 { body.withUnsafeMutableBytes { _ = evbuffer_remove(buffer, $0.baseAddress, length) } }
                evbuffer_free(buffer)
                completion(.success(body))
            }
        case .stream(let onData, let onEnd):
            let chunk = evbuffer_new()!
            defer { evbuffer_free(chunk) }
            let result = request.decoder.decode(from: input, into: chunk)
            if evbuffer_get_length(chunk) > 0 { onData(chunk) }
            switch result {
            case .needMore:
                return
            case .malformed(let why):
                bodyBroken(request, .malformed(why))
            case .done:
                request.bodyConsumer = .done
                bodyComplete()
                onEnd(.success(()))
            }
        }
    }

    private func bodyComplete() {
        setTimeouts(read: nil)
    }

    private func bodyBroken(_ request: HTTPServerRequest, _ error: HTTPBodyError) {
        closeAfterResponse = true
        request.keepAlive = false
        request.fail(body: error)
    }

    // MARK: Writing

    /// Called by the request once its response is fully queued.
    func responseFinished(_ request: HTTPServerRequest) {
        guard request === current else { return }
        request.finished = true
        flushOutput()
        if !request.decoder.isDone {
            // Drop whatever of the unread body has already arrived; if more is due, close.
            let sink = evbuffer_new()!
            _ = request.decoder.decode(from: input, into: sink)
            evbuffer_free(sink)
            if !request.decoder.isDone { closeAfterResponse = true }
        }
        if !request.keepAlive || closeAfterResponse {
            closeWhenDrained = true
            if let bev { bufferevent_disable(bev, Int16(EV_READ)) }
            if evbuffer_get_length(output) == 0 { close() }
            return
        }
        current = nil
        setTimeouts(read: server.configuration.idleTimeout)
        processInput()
    }

    private func writable() {
        if let bev { bufferevent_disable(bev, Int16(EV_WRITE)) }
        if closeWhenDrained {
            close()
            return
        }
        current?.onWritable?()
    }

    func closeWhenIdle() {
        if current == nil {
            close()
        } else {
            current?.keepAlive = false
        }
    }

    // MARK: Events

    private func event(_ events: Int16) {
        if events & Int16(BEV_EVENT_EOF) != 0, let request = current, !request.finished,
           request.decoder.isDone, events & Int16(BEV_EVENT_WRITING) == 0 {
            // Half-close after a complete request: still answer, then close.
            request.keepAlive = false
            if let bev { bufferevent_disable(bev, Int16(EV_READ)) }
            return
        }
        close()
    }

    func close() {
        guard !closed else { return }
        closed = true
        if let request = current, !request.finished {
            request.finished = true
            request.fail(body: .incomplete)
            let abort = request.onAbort
            request.onAbort = nil
            abort?()
        }
        current = nil
        if let bev {
            bufferevent_free(bev)
            self.bev = nil
        }
        server.connectionClosed(self)
    }
}
