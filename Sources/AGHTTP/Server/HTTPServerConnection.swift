// Longer than the usual 300 lines: the one class that carries out the connection state
// machine's actions on the bufferevent (reading heads, writing answers, deadlines, events),
// whose private state those steps share; bodies and TLS setup live in their own files.
internal import CEvent
internal import CShims
internal import AGEventLoop
internal import AGCrypto
#if canImport(Glibc)
import Glibc
#endif

/// One client connection: parses request heads, feeds bodies, writes responses, keeps alive.
///
/// Its life is one `HTTPConnectionStateMachine`; this class carries out the machine's actions
/// on the bufferevent (and, on a plain socket, its `PlainSocketReader`). Memory is bounded:
/// input by the read bound (`readHighWatermark`), output by `maxPendingOutput` (no further
/// pipelined head is read above it), and a client that does not read its answers is cut off by
/// the write timeout, which only the client's progress resets.
///
/// A TLS connection (an OpenSSL bufferevent) starts in `.handshaking` under the handshake
/// deadline, and leaves writing to libevent (it cannot write past the TLS layer itself).
final class HTTPServerConnection {
    unowned let server: HTTPServer
    private var bev: OpaquePointer?
    let remoteAddress: String
    /// The connection is TLS (the request's `isSecure`, `X-Forwarded-Proto: https`).
    let isSecure: Bool
    /// The bufferevent's output; others reach it through `output`, which queues a pending head
    /// first.
    private let queued: OpaquePointer
    let input: OpaquePointer
    /// The bufferevent's socket (fetched once: `bufferevent_getfd` takes its lock).
    private let descriptor: Int32
    /// Accepted through the process's reserved descriptor (given back when closed).
    let reserved: Bool
    /// The request being read or answered. Holds the only link back: a request that stops
    /// being current loses its `connection`, so it never reaches a connection that is gone.
    private(set) var current: HTTPServerRequest? {
        willSet { if let current, current !== newValue { current.connection = nil } }
    }
    var machine: HTTPConnectionStateMachine
    /// A handler that answers inside its own call must not parse the next pipelined head
    /// there too: the outer loop in `processInput` picks it up (a re-entrancy guard, not state).
    private var parsingInput = false
    /// The bytes of the current head; reused for the next one once nothing else holds them.
    private var headStorage: [UInt8] = []
    /// The current head's field list, likewise.
    private var fieldList: [HTTPField] = []
    /// Response heads are built here, then added to the output in one piece — or, on a plain
    /// socket with nothing queued, sent from here with a small body (`headPending`).
    private var writer = HTTPHeadWriter(capacity: 0)
    /// The head in `writer` is not queued yet: `flushOutput` sends it, with the body bytes
    /// `appendBody` put behind it, in one `send`. Anything else that touches the output queues
    /// it first (`output`), so nothing ever overtakes it.
    private var headPending = false
    /// Fires at the head deadline, and at the end of each body-rate window.
    private var deadline: EventTimer?
    /// Body bytes seen when the current body-rate window started.
    var bodyWindowStart: Int?
    /// Bytes read and dropped after the last answer (`discardInput`).
    private var discardedBytes = 0
    /// Plain sockets: reads in place of the bufferevent (no FIONREAD query per read) and bounds
    /// the input at `readHighWatermark`; nil under TLS and once closed.
    private var reader: PlainSocketReader?
    /// Empty lines skipped before the request line now awaited (`skipEmptyLines`).
    private var emptyLinesSkipped = 0
    /// The response was cut and only the connection's end could say so (no length, no chunked
    /// coding): the connection ends with a reset, and under TLS without close_notify, not with
    /// the orderly close that would make the cut body look whole (`endAbortively`).
    private var abortive = false
    /// Re-checks, while an abortive close waits, whether the kernel has sent what was written.
    private var sendWait: EventTimer?
    private var sendWaitUntil: ContinuousClock.Instant?

    /// Wraps an accepted socket, in TLS when `tls` is given; nil (socket closed) when OpenSSL or
    /// libevent cannot make the connection.
    init?(server: HTTPServer, fd: Int32, remoteAddress: String, reserved: Bool, tls: TLSServerContext?) {
        self.server = server
        self.remoteAddress = remoteAddress
        self.reserved = reserved
        isSecure = tls != nil
        machine = HTTPConnectionStateMachine(handshaking: tls != nil)
        // Responses are written whole; Nagle would only delay a head and body sent apart.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        let made: OpaquePointer?
        if let tls {
            // The bufferevent owns the SSL from here (freed with it, failure included).
            made = tls.makeConnection().flatMap {
                bufferevent_openssl_socket_new(server.loop.base, fd, $0, BUFFEREVENT_SSL_ACCEPTING, options)
            }
            // Clients often close without close_notify; HTTP framing tells truncation apart.
            if let made { bufferevent_openssl_set_allow_dirty_shutdown(made, 1) }
        } else {
            made = bufferevent_socket_new(server.loop.base, fd, options)
        }
        guard let bev = made else {
            evutil_closesocket(fd)
            return nil
        }
        self.bev = bev
        self.input = bufferevent_get_input(bev)
        self.queued = bufferevent_get_output(bev)
        descriptor = fd
    }

    /// The output buffer, with a pending head queued in it first.
    var output: OpaquePointer {
        queuePendingHead()
        return queued
    }

    /// Answer bytes not yet handed to the socket: queued, or a head kept back to go with its body.
    var unsentBytes: Int { evbuffer_get_length(queued) + (headPending ? writer.count : 0) }

    private func queuePendingHead() {
        guard headPending else { return }
        headPending = false
        writer.withUnsafeBytes { _ = evbuffer_add(queued, $0.baseAddress, $0.count) }
    }

    /// Reached without `close()` only when the server itself is dropped: the bufferevent must
    /// not outlive its callback context.
    deinit {
        current?.connection = nil
        reader?.close()
        if let bev { bufferevent_free(bev) }
    }

    var configuration: HTTPServerConfiguration { server.configuration }

    /// The bufferevent, for the TLS extension (nil once closed).
    var bufferEvent: OpaquePointer? { bev }

    func start() {
        guard let bev else { return }
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, context in
            let connection = Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue()
            withExtendedLifetime(connection) { connection.readable() }
        }, { _, context in
            Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue().writable()
        }, { _, events, context in
            Unmanaged<HTTPServerConnection>.fromOpaque(context!).takeUnretainedValue().event(events)
        }, context)
        if let handshakeTimeout = server.tls?.handshakeTimeout, isSecure {
            // libevent's read watermark bounds the input: a TLS bufferevent may decrypt several
            // records before it calls back, so the bound holds from the start.
            bufferevent_setwatermark(bev, Int16(EV_READ), 0, configuration.readHighWatermark)
            setTimeouts(read: .off)
            armDeadline(after: handshakeTimeout)
            bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
            return
        }
        reader = PlainSocketReader(base: server.loop.base, fd: descriptor, input: input,
                                   limit: configuration.readHighWatermark,
                                   onReadable: { [unowned self] in withExtendedLifetime(self) { self.readable() } },
                                   onEvent: { [unowned self] events in withExtendedLifetime(self) { self.event(events) } })
        reader?.offer = { [unowned self] bytes in withExtendedLifetime(self) { self.takeHead(bytes) } }
        // The bufferevent times writes only; the reader times reads (`setTimeouts`).
        var writeTV = server.timevals.write
        bufferevent_set_timeouts(bev, nil, &writeTV)
        setTimeouts(read: .idle)
        // Writes go straight to the socket (`flushOutput`); EV_WRITE is only armed while a
        // write is left over, which saves two epoll_ctl calls per response.
        bufferevent_disable(bev, Int16(EV_WRITE))
        reader?.setEnabled(true)
    }

    /// Writes queued output to the socket now; arms EV_WRITE only for what the socket did not
    /// take. EV_WRITE is never re-armed while armed: re-arming restarts the write timeout,
    /// which must run from the last progress the client allowed, not from our last answer.
    /// On TLS, EV_WRITE stays enabled and libevent encrypts and writes what is queued (it arms
    /// the write event, with its timeout, only when output arrives in an empty buffer).
    func flushOutput() {
        guard let bev, !isSecure else { return }
        if headPending {
            // Nothing is queued (a head is kept back only then, and every other write queues
            // it first): the head and its body leave from the writer in one send.
            headPending = false
            writer.withUnsafeBytes { sendOrQueue($0, on: bev, fd: descriptor, queueingIn: queued) }
            return
        }
        guard evbuffer_get_length(queued) > 0 else { return }
        guard bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0 else { return }
        writeQueuedOutput(queued, to: descriptor)
        if evbuffer_get_length(queued) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        }
    }

    /// Whether the head scanned so far ends its lines with a bare LF (a function of its own so
    /// that the span of the stored bytes lives inside one call).
    private static func endsInBareLineFeed(_ storage: [UInt8]) -> Bool {
        HTTPHeadParser.boundary(storage.span) == .bareLineFeed
    }

    /// Builds a head with the connection's writer. On a plain socket with nothing queued and
    /// no write armed it is kept back for `flushOutput` to send with the body; otherwise
    /// queued in one piece.
    func writeHead(_ build: (inout HTTPHeadWriter) -> Void) {
        queuePendingHead()
        writer.reset()
        build(&writer)
        if let bev, !isSecure, canSendNow(bev, queued) {
            headPending = true
        } else {
            writer.withUnsafeBytes { _ = evbuffer_add(queued, $0.baseAddress, $0.count) }
        }
    }

    /// Body bytes a pending head may carry along in its send; larger bodies are queued behind
    /// it (the writer, and its capacity, stay small).
    static let bodyBytesSentWithHead = 4096

    /// Appends response body bytes, draining `buffer`: behind a pending head in the writer
    /// when they are few, else queued.
    func appendBody(_ buffer: OpaquePointer) {
        let length = evbuffer_get_length(buffer)
        if headPending, length <= Self.bodyBytesSentWithHead {
            writer.appendRemoving(length, from: buffer)
        } else {
            evbuffer_add_buffer(output, buffer)
        }
    }

    /// Appends response body bytes: behind a pending head in the writer when they are few,
    /// else queued.
    func appendBody(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { appendBody($0) }
    }

    /// Appends response body bytes from memory, as `appendBody(_: [UInt8])` does.
    func appendBody(_ bytes: UnsafeRawBufferPointer) {
        if headPending, bytes.count <= Self.bodyBytesSentWithHead {
            writer.append(bytes)
        } else if let start = bytes.baseAddress {
            evbuffer_add(output, start, bytes.count)
        }
    }

    /// Which read timeout runs: none (a handler is answering), the request's (head and body
    /// being read), the keep-alive idle timeout or the lingering one (between reads after the
    /// last answer). The write timeout always runs.
    enum ReadTimeout {
        case off, request, idle, lingering
    }

    func setTimeouts(read: ReadTimeout) {
        guard let bev else { return }
        let timevals = server.timevals
        if let reader {
            switch read {
            case .off: reader.setTimeout(nil)
            case .request: reader.setTimeout(timevals.read)
            case .idle: reader.setTimeout(timevals.idle)
            case .lingering: reader.setTimeout(timevals.lingering)
            }
            return
        }
        var writeTV = timevals.write
        switch read {
        case .off:
            bufferevent_set_timeouts(bev, nil, &writeTV)
        case .request:
            var readTV = timevals.read
            bufferevent_set_timeouts(bev, &readTV, &writeTV)
        case .idle:
            var readTV = timevals.idle
            bufferevent_set_timeouts(bev, &readTV, &writeTV)
        case .lingering:
            var readTV = timevals.lingering
            bufferevent_set_timeouts(bev, &readTV, &writeTV)
        }
    }

    func setReading(_ on: Bool) {
        if let reader {
            reader.setEnabled(on)
            return
        }
        guard let bev else { return }
        if on { bufferevent_enable(bev, Int16(EV_READ)) } else { bufferevent_disable(bev, Int16(EV_READ)) }
    }

    /// Arms the connection's one timer (created on first use: most heads arrive whole).
    func armDeadline(after delay: Duration) {
        if deadline == nil {
            deadline = EventTimer(loop: server.loop) { [unowned self] in self.deadlineFired() }
        }
        deadline?.arm(after: delay)
    }

    func cancelDeadline() {
        deadline?.cancel()
        bodyWindowStart = nil
    }

    private func deadlineFired() {
        switch machine.state {
        case .handshaking: handshakeTimedOut()
        case .readingHead: refuse(.headTimeout, headStored: false)
        case .lingering: close()
        default: bodyRateWindowEnded()
        }
    }

    // MARK: Reading

    private func readable() {
        if machine.discardsInput {
            discardInput()
            return
        }
        if let current {
            if !current.finished { pumpBody() }
            return
        }
        processInput()
    }

    /// Parses as many request heads as can be answered now (pipelined requests one at a time,
    /// and none while the answers already queued exceed `maxPendingOutput`).
    private func processInput() {
        guard !parsingInput else { return }
        parsingInput = true
        defer { parsingInput = false }
        while awaitingHead, evbuffer_get_length(input) > 0 {
            guard parseHead() else { return }
        }
    }

    /// No request in progress and the answers already queued under `maxPendingOutput`: the
    /// next head may be read (from the input, or straight from a read by `takeHead`).
    private var awaitingHead: Bool {
        current == nil && (machine.state == .idle || machine.state == .readingHead)
            && unsentBytes <= configuration.maxPendingOutput
    }

    /// Returns false when more input is needed or the connection is closing.
    private func parseHead() -> Bool {
        guard skipEmptyLines() else { return false }
        let available = evbuffer_get_length(input)
        let maxHead = configuration.maxHeadBytes
        guard let headLength = headEnd(in: input, limit: maxHead) else {
            let scanned = min(available, maxHead)
            copyHead(scanned)
            if Self.endsInBareLineFeed(headStorage) {
                refuse(HTTPLocalError(.malformed("bare LF line ending")))
            } else if available > maxHead {
                // No blank line within the limit, whether one follows beyond it or not; not even
                // the end of the request line: the target is too long (nginx's 414 too).
                refuse(HTTPLocalError(headStorage.contains(UInt8(ascii: "\n")) ? .headTooLarge : .requestLineTooLong))
            } else {
                if machine.partialHeadArrived() == .startHeadDeadline { armDeadline(after: configuration.headerTimeout) }
                setTimeouts(read: .request)
            }
            return false
        }
        copyHead(headLength)
        evbuffer_drain(input, headLength)
        return startRequest()
    }

    /// The most empty lines skipped before one request line; more is refused like an empty
    /// request line (each read restarts the idle timeout, so they must not go on forever).
    static let maxEmptyLinesBeforeRequest = 8

    /// RFC 9112 section 2.2: a server SHOULD ignore at least one empty line (CRLF) before a
    /// request line; some clients send one after a body. Drops CRLFs at the front of the input;
    /// false when nothing else is there yet or the connection was refused. A bare LF is not an
    /// empty line here: it is refused as in every other line of a head (a parser that takes it
    /// for one reads lines where this one does not — the smuggling defence of
    /// `HTTPStrictnessTests`).
    private func skipEmptyLines() -> Bool {
        while true {
            let length = evbuffer_get_length(input)
            guard length > 0 else { return false }
            guard let front = evbuffer_pullup(input, min(length, 2)), front[0] == 0x0D else { return true }
            // A CR alone waits for its LF; a CR before anything else is the parser's to refuse.
            guard length >= 2 else { return false }
            guard front[1] == 0x0A else { return true }
            evbuffer_drain(input, 2)
            emptyLinesSkipped += 1
            if emptyLinesSkipped > Self.maxEmptyLinesBeforeRequest {
                refuse(HTTPLocalError(.malformed("empty request line")), headStored: false)
                return false
            }
        }
    }

    /// A whole head read into an empty input while a head is awaited, taken straight from the
    /// read (`PlainSocketReader.offer`): copied once into the head buffer, whatever follows it
    /// (a body, pipelined heads) put into the input before the handler runs. Through the
    /// input's buffer chain each head cost a chain allocated and freed, two copies and a scan
    /// across the chain (~1,000 instructions per proxied request). False for anything else (a
    /// partial head, one past the limit, a request in progress): the usual way then decides.
    private func takeHead(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // A read starting with CR may open with empty lines: the input's way skips them.
        guard !parsingInput, awaitingHead, let start = bytes.baseAddress, bytes[0] != 0x0D,
              let headLength = blankLineEnd(start, count: min(bytes.count, configuration.maxHeadBytes)) else {
            return false
        }
        storeHead(UnsafeRawBufferPointer(rebasing: bytes[..<headLength]))
        if headLength < bytes.count, evbuffer_add(input, start + headLength, bytes.count - headLength) != 0 {
            // Out of memory: closed, as a read that cannot be stored closes the connection.
            close()
            return true
        }
        parsingInput = true
        let started = startRequest()
        parsingInput = false
        if started { processInput() }
        return true
    }

    /// Parses the head in `headStorage` and hands the request to the server's handler (true),
    /// or refuses it (false: nothing more is read).
    private func startRequest() -> Bool {
        // The head goes into the request where it is parsed: held in a local across the
        // `do`, it was copied on the way (four references retained and released, ~230
        // instructions per request).
        let request: HTTPServerRequest
        do {
            let head = try HTTPHeadParser.parseRequest(headStorage, fieldList: &fieldList)
            let framing = try HTTPHeadParser.requestFraming(head)
            request = HTTPServerRequest(connection: self, head: head, framing: framing, remoteAddress: remoteAddress)
        } catch {
            refuse(HTTPLocalError(error))
            return false
        }
        cancelDeadline()
        emptyLinesSkipped = 0
        if server.isShuttingDown { request.keepAlive = false }
        machine.requestStarted(keepAlive: request.keepAlive)
        current = request
        setTimeouts(read: request.framing == .none ? .off : .request)
        server.handler(request)
        return true
    }

    /// Copies the first `length` input bytes into the reusable head buffer.
    private func copyHead(_ length: Int) {
        storeHead(UnsafeRawBufferPointer(start: length > 0 ? evbuffer_pullup(input, length) : nil, count: length))
    }

    /// `bytes` in the reusable head buffer, replacing what it held.
    private func storeHead(_ bytes: UnsafeRawBufferPointer) {
        headStorage.removeAll(keepingCapacity: true)
        headStorage.append(contentsOf: bytes)
    }

    /// Answers a head the server will not serve (through the owner's renderer), then closes.
    /// `headStored`: `headStorage` holds this head (or its start), whose request line, when it
    /// reads as one, names the request in the access log; otherwise it may hold an earlier one.
    private func refuse(_ error: HTTPLocalError, headStored: Bool = true) {
        cancelDeadline()
        setReading(false)
        let head = headStored ? HTTPRequestHead.unparsed(requestLineOf: headStorage) : .unparsed
        let request = HTTPServerRequest(connection: self, head: head, framing: .none, remoteAddress: remoteAddress,
                                        localError: error)
        machine.requestStarted(keepAlive: false)
        current = request
        server.localReply(request, error)
    }

    // MARK: Writing

    /// The current response was cut where only the connection's end marks a body's end: once
    /// its output is written, the connection closes with a TCP reset (`SO_LINGER` 0), without
    /// a TLS close_notify and without lingering.
    func endAbortively() {
        abortive = true
    }

    /// The orderly `close(notifyPeer: true)`, but an abortive close first lets the kernel send
    /// what it holds (a reset throws it away): re-checked every 10 ms, for at most the write timeout.
    private func closeOnceSent() {
        guard abortive, bev != nil else { return close(notifyPeer: true) }
        let now = ContinuousClock.now
        let until = sendWaitUntil ?? now + server.configuration.writeTimeout
        sendWaitUntil = until
        guard ag_socket_unsent_bytes(descriptor) > 0, now < until else { return close() }
        if sendWait == nil {
            sendWait = EventTimer(loop: server.loop) { [unowned self] in self.closeOnceSent() }
        }
        sendWait?.arm(after: .milliseconds(10))
    }

    /// Called by the request once its response is fully queued.
    func responseFinished(_ request: HTTPServerRequest) {
        guard request === current else { return }
        request.response = .complete
        flushOutput()
        // Whatever of the unread body has already arrived is dropped; if more is due, close.
        let reusable = discardArrivedBody(request) && request.keepAlive
        cancelDeadline()
        // The client may still be sending when its body is not over, bytes wait unread, or
        // its head was refused (a body may follow it); a client whose head timed out is not
        // waited for any longer.
        let clientMaySend = request.localError == .headTimeout || abortive ? false
            : !request.decoder.isDone || evbuffer_get_length(input) > 0 || request.localError != nil
        switch machine.responseFinished(reusable: reusable, clientMaySend: clientMaySend) {
        case .readNextRequest:
            current = nil
            setTimeouts(read: .idle)
            processInput()
        case .drainThenClose:
            setReading(false)
            if evbuffer_get_length(output) == 0 { _ = machine.outputDrained(); closeOnceSent() }
        case .drainThenLinger:
            // Reading goes on while the answer drains: a client blocked writing its upload
            // would otherwise never read the answer. No read timeout meanwhile (the write's runs).
            guard discardInput() else { return }
            setTimeouts(read: .off)
            setReading(true)
            if evbuffer_get_length(output) == 0, machine.outputDrained() == .linger { startLingering() }
        default:
            break
        }
    }

    /// Drops what of the request's unread body has already arrived; true when the body is
    /// complete (nothing of it is left to come).
    func discardArrivedBody(_ request: HTTPServerRequest) -> Bool {
        guard !request.decoder.isDone else { return true }
        let sink = evbuffer_new()!
        _ = request.decoder.decode(from: input, into: sink)
        evbuffer_free(sink)
        return request.decoder.isDone
    }

    /// The answer is written: shut the write side (after a TLS close_notify) and read and
    /// drop what the client still sends until it closes, `lingeringTimeout` passes without a
    /// read, `lingeringTime` passes in all or `lingeringMaxBytes` were read (nginx's
    /// lingering close). The connection stays counted among the server's meanwhile.
    private func startLingering() {
        guard bev != nil else { return }
        current = nil
        if let ssl = tlsConnection { TLSConnectionInfo.sendCloseNotify(ssl) }
        _ = Glibc.shutdown(descriptor, Int32(SHUT_WR))
        guard discardInput() else { return }
        setTimeouts(read: .lingering)
        setReading(true)
        armDeadline(after: configuration.lingeringTime)
    }

    /// Drops the input, counting it against `lingeringMaxBytes`; false when that closed the
    /// connection.
    @discardableResult
    private func discardInput() -> Bool {
        let length = evbuffer_get_length(input)
        guard length > 0 else { return true }
        evbuffer_drain(input, length)
        discardedBytes += length
        guard discardedBytes <= configuration.lingeringMaxBytes else {
            close()
            return false
        }
        return true
    }

    private func writable() {
        if let bev, !isSecure { bufferevent_disable(bev, Int16(EV_WRITE)) }
        switch machine.outputDrained() {
        case .close:
            closeOnceSent()
            return
        case .linger:
            startLingering()
            return
        default:
            break
        }
        if let current {
            current.onWritable?()
        } else {
            // Pipelined heads waited for the queued answers to go out.
            processInput()
        }
    }

    /// The server is shutting down.
    func shutdown() {
        let handshaking = machine.state == .handshaking
        switch machine.shutdown() {
        case .close: close(notifyPeer: !handshaking)
        case .stopReading: setReading(false)
        default: current?.keepAlive = false
        }
    }

    // MARK: Events

    private func event(_ events: Int16) {
        if machine.state == .handshaking {
            handshakeEvent(events)
            return
        }
        if isSecure {
            // libevent's OpenSSL bufferevent stops writing as well as reading when the TLS
            // connection ends (its `conn_closed`): an answer still queued would never go out,
            // and the connection would wait for it with no event and no timeout left — forever
            // (an independent sweep leaked a descriptor per refused head this way). So a TLS
            // peer's close ends the connection, answered with our own close_notify (RFC 8446
            // section 6.1) when it was an orderly one.
            close(notifyPeer: events & Int16(BEV_EVENT_EOF) != 0 || events & Int16(BEV_EVENT_TIMEOUT) != 0)
            return
        }
        if machine.state == .draining(linger: true), events & Int16(BEV_EVENT_EOF) != 0,
           events & Int16(BEV_EVENT_WRITING) == 0 {
            // The client closed while its answer drains: that still goes out, then close.
            if machine.peerClosed(requestComplete: true) == .stopReading { setReading(false) }
            return
        }
        if events & Int16(BEV_EVENT_EOF) != 0, events & Int16(BEV_EVENT_WRITING) == 0, let request = current,
           !request.finished {
            if machine.peerClosed(requestComplete: request.decoder.isDone) == .stopReading {
                // Half-close after a complete request: still answer, then close.
                request.keepAlive = false
                setReading(false)
                return
            }
        }
        // A timeout is ours to end cleanly; after an error or the peer's close there is no one to tell.
        close(notifyPeer: events & Int16(BEV_EVENT_TIMEOUT) != 0)
    }

    /// Closes the connection; `notifyPeer` sends a TLS close_notify first (an orderly end,
    /// after the handshake and without a fatal TLS error).
    func close(notifyPeer: Bool = false) {
        let handshakeDone = machine.state != .handshaking
        _ = machine.abort()
        guard let bev else { return }
        sendWait?.cancel()
        // A body that only the connection's end ends, cut here (a timeout, the shutdown grace,
        // the client stalled): that end must not look like a whole body's either.
        if let request = current, case .streaming = request.response, request.endsWithConnection { abortive = true }
        if abortive {
            var reset = linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
        } else if notifyPeer, handshakeDone, let ssl = tlsConnection {
            TLSConnectionInfo.sendCloseNotify(ssl)
        }
        cancelDeadline()
        deadline = nil
        if let request = current, !request.finished {
            request.response = .complete
            request.fail(body: .incomplete)
            let abort = request.onAbort
            request.onAbort = nil
            abort?()
        }
        current = nil
        // The reader's event goes before the bufferevent closes the socket.
        reader?.close()
        reader = nil
        bufferevent_free(bev)
        self.bev = nil
        server.connectionClosed(self)
    }
}
