// Longer than the usual 300 lines: one exchange state machine (connect, send, response head,
// body, endings) whose transitions read best side by side; the byte-level work lives elsewhere.
#if canImport(Glibc)
import Glibc
#endif
internal import CEvent

/// One forwarded request: finds a connection (an idle one, or a new one to the target's
/// address, resolved and tried in turn for a host name: `UpstreamExchange+Endpoints`), writes
/// the head, streams the client's body up and the upstream's response down with backpressure
/// both ways, and reports the outcome once.
///
/// Loop thread only. The connection serving it keeps it alive, and so do the request's abort
/// and writable hooks until every ending clears them (`clearHooks`): a finished exchange is
/// freed as soon as its connection lets go. Those two hold it strongly, not weakly: a weak
/// reference gives the object a side table (an allocation and a slower release, ~800
/// instructions per proxied request); the body-stream hooks, which no ending clears, stay weak.
/// It keeps the pool alive while in flight.
final class UpstreamExchange {
    enum State {
        /// Waiting for the resolver (host-name targets without a cached answer).
        case resolving
        case connecting
        /// Head written; the body may still be streaming up; waiting for the response head.
        case awaitingHead
        case receivingBody
        case finished
    }

    let pool: UpstreamPool
    private let request: HTTPServerRequest
    let target: UpstreamTarget
    private let head: [UInt8]
    let timeouts: UpstreamTimeouts
    private let maxBodyBytes: Int
    /// Writes the client's response fields and hears the outcome; held until the exchange is
    /// freed (the gateway's request context, which does not hold the exchange).
    private let owner: any UpstreamExchangeOwner
    private let startedAt: ContinuousClock.Instant

    var state = State.connecting
    private var connection: UpstreamConnection?
    /// The endpoint being used.
    var endpoint: UpstreamEndpoint?
    /// A host name's endpoints in the order they are tried; empty for an IP literal.
    var candidates: [UpstreamEndpoint] = []
    var candidateIndex = 0
    private var retried = false
    private var bodyStreamStarted = false
    private var bodyBytesSent = 0
    /// The whole request, body included, is in the upstream's output buffer.
    private var requestQueued = false
    /// Some response byte arrived on the current connection.
    private var responseBytesSeen = false
    private var responseStatus = 0
    private var responseDecoder = BodyDecoder(.none)
    private var responseReusable = false
    /// Upstream reads are off because the client's output is full.
    private var readsPaused = false

    init(pool: UpstreamPool, request: HTTPServerRequest, target: UpstreamTarget, head: [UInt8],
         timeouts: UpstreamTimeouts, maxBodyBytes: Int, owner: any UpstreamExchangeOwner) {
        self.pool = pool
        self.request = request
        self.target = target
        self.head = head
        self.timeouts = timeouts
        self.maxBodyBytes = maxBodyBytes
        self.owner = owner
        self.startedAt = .now
    }

    /// Takes a pooled connection (LIFO) or opens a new one; a host name is resolved first.
    func start() {
        // The client left before the exchange began (its close came while a lease or a device
        // check was on its way to Redis): nothing goes upstream. Before, the head went out and
        // the body stream waited for an end that had already passed, holding the upstream
        // connection with no timeout (an independent sweep, stop 36: ~10 % of clients that
        // closed at once, held for minutes, then logged as upstream errors).
        guard !request.finished else {
            fail(.clientAborted)
            return
        }
        request.onAbort = { [self] in clientAborted() }
        guard let literal = target.literalEndpoint else {
            resolve()
            return
        }
        endpoint = literal
        if let pooled = pool.takeIdle(literal) {
            attach(pooled)
            send()
        } else {
            connect()
        }
    }

    func connect() {
        state = .connecting
        guard let endpoint else { return }
        pool.connectAttempts += 1
        do {
            attach(try UpstreamConnection(pool: pool, endpoint: endpoint, tls: target.tls, connectTimeout: timeouts.connect))
        } catch {
            connectFailed(error)
        }
    }

    func attach(_ connection: UpstreamConnection) {
        self.connection = connection
        connection.exchange = self
    }

    /// Lets go of the connection, closing it unless `reuse`; the connection may have been the
    /// last owner of this exchange, so callers keep `self` alive while they finish.
    func detach(reuse: Bool) {
        guard let connection else { return }
        self.connection = nil
        if reuse {
            pool.release(connection)
        } else {
            connection.close()
        }
    }

    // MARK: Request

    func send() {
        guard let connection else { return }
        state = .awaitingHead
        responseBytesSeen = false
        if request.framing == .none {
            // No body to stream: the whole request is queued by the write below, so the
            // response timeout runs both ways from here (one timeout change per request, not two).
            markRequestQueued()
        } else {
            connection.setTimeouts(read: nil, write: timeouts.response)
        }
        connection.setReading(true)
        head.withUnsafeBytes { connection.write($0) }
        guard request.framing != .none else { return }
        if !bodyStreamStarted {
            bodyStreamStarted = true
            request.streamBody(onData: { [weak self] chunk in self?.clientBody(chunk) },
                               onEnd: { [weak self] result in self?.clientBodyEnded(result) })
        } else {
            request.bodyPaused = false
        }
    }

    private func clientBody(_ chunk: OpaquePointer) {
        guard let connection, state == .awaitingHead || state == .receivingBody else { return }
        let length = evbuffer_get_length(chunk)
        bodyBytesSent += length
        guard bodyBytesSent <= maxBodyBytes else {
            fail(.bodyTooLarge)
            return
        }
        if request.framing == .chunked {
            ChunkedEncoder.writeChunk(from: chunk, to: connection.output)
        } else {
            evbuffer_add_buffer(connection.output, chunk)
        }
        connection.flushOutput()
        if evbuffer_get_length(connection.output) > pool.configuration.highWatermark {
            request.bodyPaused = true
        }
    }

    private func clientBodyEnded(_ result: Result<Void, HTTPBodyError>) {
        switch result {
        case .success:
            guard let connection, state == .awaitingHead || state == .receivingBody else { return }
            if request.framing == .chunked { ChunkedEncoder.writeEnd(to: connection.output) }
            connection.flushOutput()
            markRequestQueued()
        case .failure(.incomplete):
            clientAborted()
        case .failure(.malformed(let why)):
            fail(.clientBodyMalformed(why))
        case .failure(.tooLarge):
            fail(.bodyTooLarge)
        }
    }

    /// From here the response timeout runs: the head must arrive in time.
    private func markRequestQueued() {
        requestQueued = true
        if state == .awaitingHead {
            connection?.setTimeouts(read: timeouts.response, write: timeouts.response)
        }
    }

    // MARK: Upstream events

    func upstreamWritable(_ connection: UpstreamConnection) {
        if bodyStreamStarted, !requestQueued, request.bodyPaused {
            request.bodyPaused = false
        }
    }

    func upstreamReadable(_ connection: UpstreamConnection) {
        switch state {
        case .awaitingHead:
            readHead(connection)
        case .receivingBody:
            pumpResponseBody()
        case .resolving, .connecting, .finished:
            break
        }
    }

    func upstreamEvent(_ connection: UpstreamConnection, events: Int16, error: Int32) {
        if events & Int16(BEV_EVENT_CONNECTED) != 0 {
            guard state == .connecting else { return }
            if let endpoint { pool.connectSucceeded(endpoint) }
            send()
            return
        }
        let timedOut = events & Int16(BEV_EVENT_TIMEOUT) != 0
        switch state {
        case .connecting:
            if let failure = connection.handshakeFailure() {
                fail(.tlsFailed(failure.detail))
            } else {
                let reason = error != 0 ? String(cString: strerror(error))
                    : connection.handshakeBegan ? "connection closed during the TLS handshake" : "connection refused"
                connectFailed(timedOut ? .timeout : .connectFailed(reason))
            }
        case .awaitingHead:
            if timedOut {
                fail(.timeout)
            } else if canRetry(connection) {
                retry()
            } else {
                fail(.connectionReset)
            }
        case .receivingBody:
            if timedOut {
                interrupt(.timeout)
            } else if events & Int16(BEV_EVENT_EOF) != 0, responseDecoder.endsAtClose {
                pumpResponseBody()
                finish(reuse: false)
            } else {
                interrupt(.connectionReset)
            }
        case .resolving, .finished:
            break
        }
    }

    /// A pooled connection the upstream closed while idle, detected only after we wrote to it.
    /// The close cannot be told from an upstream that read the request, acted on it and then
    /// went away, so only an idempotent request is sent again (RFC 9110 section 9.2.2: "A proxy
    /// MUST NOT automatically retry non-idempotent requests"; nginx and HAProxy answer 502 too),
    /// and only if the upstream sent nothing back and the client's body can still be sent in
    /// full (none of it was consumed).
    private func canRetry(_ connection: UpstreamConnection) -> Bool {
        connection.reused && !retried && !responseBytesSeen && bodyBytesSent == 0 && Self.isIdempotent(request.method)
    }

    /// RFC 9110 section 9.2.2: the safe methods, PUT and DELETE.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": true
        default: false
        }
    }

    private func retry() {
        retried = true
        detach(reuse: false)
        if bodyStreamStarted { request.bodyPaused = true }
        connect()
    }

    // MARK: Response

    private func readHead(_ connection: UpstreamConnection) {
        let input = connection.input
        while true {
            let available = evbuffer_get_length(input)
            guard available > 0 else { return }
            responseBytesSeen = true
            let limit = pool.configuration.maxResponseHeadBytes
            guard let headLength = headEnd(in: input, limit: limit) else {
                // No blank line within the limit, whether one follows beyond it or not.
                if available > limit { fail(.invalidResponse("response head too large")) }
                return
            }
            let storage = pool.responseHeadBytes(from: input, length: headLength)
            evbuffer_drain(input, headLength)
            guard let (parsed, framing) = parseHead(storage) else {
                // An interim response: the final one follows (after a refused head, over).
                if state == .awaitingHead { continue }
                return
            }
            startResponse(parsed, framing: framing)
            return
        }
    }

    /// A whole response head read into an empty input while one is awaited, taken straight
    /// from the read (`PlainSocketReader.offer`): copied once into the pool's head buffer; a
    /// Content-Length body behind it goes from the read to the client, anything else into the
    /// input first (through the input's chain, each head cost its pull-up, copy and drain, and
    /// its body a chain allocated, moved and freed). False for anything else (a partial head,
    /// one past the limit, a body in progress): the usual way then decides.
    func takeHead(_ connection: UpstreamConnection, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard state == .awaitingHead, let start = bytes.baseAddress,
              let headLength = blankLineEnd(start, count: min(bytes.count, pool.configuration.maxResponseHeadBytes)) else {
            return false
        }
        responseBytesSeen = true
        let storage = pool.responseHeadBytes(UnsafeRawBufferPointer(rebasing: bytes[..<headLength]))
        let rest = UnsafeRawBufferPointer(rebasing: bytes[headLength...])
        guard let (head, framing) = parseHead(storage) else {
            // An interim response (or a refused head, the exchange then over): the rest is
            // read the usual way.
            if state == .awaitingHead { stash(rest, in: connection) }
            return true
        }
        startResponse(head, framing: framing, bodyAtHand: rest)
        return true
    }

    /// Puts bytes taken from a read into the input, as the reader would have, and reads on
    /// while a head is awaited (a body in progress is pumped by the caller).
    private func stash(_ bytes: UnsafeRawBufferPointer, in connection: UpstreamConnection) {
        guard let start = bytes.baseAddress, !bytes.isEmpty else { return }
        guard evbuffer_add(connection.input, start, bytes.count) == 0 else {
            // Out of memory: as a read that cannot be stored ends the exchange (cut short once
            // the response has started).
            return fail(.connectionReset)
        }
        if state == .awaitingHead { readHead(connection) }
    }

    /// Parses a response head: nil when it was refused (the exchange failed) or is an interim
    /// (1xx) response, which is not forwarded (the server sent its own 100 Continue).
    private func parseHead(_ storage: [UInt8]) -> (HTTPResponseHead, BodyFraming)? {
        let parsed: HTTPResponseHead
        let framing: BodyFraming
        do {
            parsed = try HTTPHeadParser.parseResponse(storage, fieldList: &pool.responseFieldList)
            framing = try HTTPHeadParser.responseFraming(parsed, requestMethod: request.method)
        } catch {
            // The parser's message for too many fields names a request; this is the response.
            fail(.invalidResponse(error == .headTooLarge ? "response header section too large" : error.message))
            return nil
        }
        if (100..<200).contains(parsed.status) {
            if parsed.status == 101 { fail(.invalidResponse("unexpected protocol switch")) }
            return nil
        }
        return (parsed, framing)
    }

    /// Starts relaying the response. `bodyAtHand`: bytes read behind its head that are not in
    /// the input (`takeHead`): a Content-Length body's go to the client from there, the rest
    /// (any other framing, bytes past the body) into the input.
    private func startResponse(_ parsed: HTTPResponseHead, framing: BodyFraming, bodyAtHand: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        let headers = parsed.headers
        if parsed.versionMinor >= 1 {
            responseReusable = !headers.containsToken("close", in: .connection)
        } else {
            // An HTTP/1.0 message with Transfer-Encoding has faulty framing whatever it says:
            // closed after it (RFC 9112 section 6.1; an independent sweep saw it pooled).
            responseReusable = headers.containsToken("keep-alive", in: .connection) && headers[.transferEncoding] == nil
        }
        if framing == .untilClose { responseReusable = false }
        let contentLength: Int?
        switch framing {
        case .length(let length):
            contentLength = length
        case .none:
            // A HEAD's and a 304's Content-Length is the length a GET's 200 would have had
            // (RFC 9110 sections 8.6, 9.3.2): relayed, with no body.
            if request.method == "HEAD" || parsed.status == 304 {
                contentLength = headers.first { $0.name == .contentLength }
                    .flatMap { HTTPHeadParser.parseContentLength(headers.storage[$0.valueRange]) }
            } else if parsed.status == 204 {
                contentLength = nil
            } else {
                contentLength = 0
            }
        case .chunked, .untilClose:
            contentLength = nil
        }
        state = .receivingBody
        responseStatus = parsed.status
        responseDecoder = BodyDecoder(framing)
        request.onWritable = { [self] in clientDrained() }
        // A phrase with control bytes (CR, NUL…) is never relayed: the status's own is written.
        let reason = parsed.reasonIsClean && !parsed.reasonRange.isEmpty ? headers.storage[parsed.reasonRange] : nil
        let owner = self.owner
        request.startResponse(status: parsed.status, reason: reason, contentLength: contentLength) { writer in
            owner.writeResponseFields(parsed, into: &writer)
        }
        if !bodyAtHand.isEmpty, let connection {
            var rest = bodyAtHand
            if !request.streamsChunked, let taken = responseDecoder.takeLengthBytes(rest.count) {
                request.writeBody(UnsafeRawBufferPointer(rebasing: rest[..<taken]))
                rest = UnsafeRawBufferPointer(rebasing: rest[taken...])
            }
            stash(rest, in: connection)
            guard state == .receivingBody else { return }
        }
        pumpResponseBody()
        // The head waits for the first body bytes, so both usually leave in one write.
        request.flushResponse()
    }

    private func pumpResponseBody() {
        guard state == .receivingBody, !readsPaused, let connection else { return }
        let scratch = pool.scratch
        let result = responseDecoder.decode(from: connection.input, into: scratch)
        let decoded = evbuffer_get_length(scratch)
        if decoded > 0 {
            request.writeBody(scratch)
            // The client may be gone, in which case nothing was taken.
            let left = evbuffer_get_length(scratch)
            if left > 0 { evbuffer_drain(scratch, left) }
        }
        switch result {
        case .done:
            finish(reuse: responseReusable && requestQueued && evbuffer_get_length(connection.input) == 0)
        case .malformed(let why):
            interrupt(.invalidResponse(why))
        case .needMore:
            if request.pendingOutput > pool.configuration.highWatermark {
                readsPaused = true
                connection.setReading(false)
            }
        }
    }

    /// The client's output drained: read from the upstream again.
    private func clientDrained() {
        guard readsPaused, state == .receivingBody else { return }
        readsPaused = false
        connection?.setReading(true)
        pumpResponseBody()
    }

    // MARK: Endings

    private func finish(reuse: Bool) {
        guard state != .finished else { return }
        state = .finished
        withExtendedLifetime(self) {
            clearHooks()
            detach(reuse: reuse)
            request.endResponse(complete: true)
            owner.exchangeEnded(.completed(status: responseStatus, upstreamTime: .now - startedAt, bodyBytes: responseDecoder.bytesDecoded))
        }
    }

    /// Fails before any response byte went to the client, or cuts the response short after.
    func fail(_ error: UpstreamError) {
        guard state != .finished else { return }
        if state == .receivingBody {
            interrupt(error)
            return
        }
        state = .finished
        withExtendedLifetime(self) {
            clearHooks()
            detach(reuse: false)
            owner.exchangeEnded(.failed(error))
        }
    }

    private func interrupt(_ error: UpstreamError) {
        guard state != .finished else { return }
        state = .finished
        withExtendedLifetime(self) {
            clearHooks()
            detach(reuse: false)
            request.endResponse(complete: false)
            owner.exchangeEnded(.interrupted(error, status: responseStatus, upstreamTime: .now - startedAt,
                                             bodyBytes: responseDecoder.bytesDecoded))
        }
    }

    private func clientAborted() {
        guard state != .finished else { return }
        if state == .receivingBody {
            interrupt(.clientAborted)
        } else {
            fail(.clientAborted)
        }
    }

    private func clearHooks() {
        request.onAbort = nil
        request.onWritable = nil
    }
}
