/// The life of one server connection as one state, with the transitions the connection acts
/// on (swift-nio's `HTTPServerPipelineHandler` is the model). Pure: no sockets, no clock, so
/// every transition is tested on its own (`HTTPConnectionStateMachineTests`).
///
/// One request is served at a time; pipelined heads wait in the input buffer until the
/// previous response is complete, which is what keeps responses in request order.
struct HTTPConnectionStateMachine: Equatable {
    enum State: Equatable {
        /// A TLS connection before its handshake finished (the handshake deadline runs).
        case handshaking
        /// Between requests: nothing of the next head has arrived (idle timeout runs).
        case idle
        /// Part of a head has arrived; the head deadline runs and no byte resets it.
        case readingHead
        /// A request is with its handler.
        case serving(Serving)
        /// The last response is queued; close once it has been written — after lingering when
        /// `linger` (the client may still be sending: its input is read and dropped meanwhile).
        case draining(linger: Bool)
        /// The answer is written and the write side shut: what the client still sends is read
        /// and dropped until it closes or the lingering limits pass (RFC 9112 section 9.6), so
        /// that no reset erases the answer before the client has read it.
        case lingering
        case closed
    }

    struct Serving: Equatable {
        /// The connection may serve another request after this one.
        var keepAlive: Bool
        /// The client has half-closed after a complete request: answer, then close.
        var peerClosed = false
        /// The server is shutting down: answer, then close without lingering.
        var shuttingDown = false
    }

    /// What the connection must do after a transition.
    enum Action: Equatable {
        case none
        /// Start the head deadline.
        case startHeadDeadline
        /// Look for the next request in the input.
        case readNextRequest
        /// Stop reading; close once the output is written.
        case drainThenClose
        /// Read and drop the input; linger once the output is written.
        case drainThenLinger
        /// Shut the write side, read and drop the input until the client closes or the
        /// lingering limits pass, then close.
        case linger
        /// Stop reading, keep writing: the response is still to come.
        case stopReading
        case close
    }

    private(set) var state: State

    /// A plain connection starts idle, a TLS one handshaking.
    init(handshaking: Bool = false) {
        state = handshaking ? .handshaking : .idle
    }

    var isClosed: Bool { state == .closed }

    /// The TLS handshake finished: the connection waits for its first request.
    mutating func handshakeCompleted() {
        guard state == .handshaking else { return }
        state = .idle
    }

    /// Bytes of a head arrived but not the whole head.
    mutating func partialHeadArrived() -> Action {
        guard state == .idle else { return .none }
        state = .readingHead
        return .startHeadDeadline
    }

    /// A whole head was parsed, or the server answers one itself (`keepAlive: false`).
    mutating func requestStarted(keepAlive: Bool) {
        switch state {
        case .idle, .readingHead: state = .serving(Serving(keepAlive: keepAlive))
        case .handshaking, .serving, .draining, .lingering, .closed: break
        }
    }

    /// The response is queued in full; `reusable` is false when the connection cannot carry
    /// another request (unread body, broken framing, a response cut short). `clientMaySend`:
    /// the client may still be sending (an unread body, unread input, a refused head), so a
    /// plain close could reset the connection under the answer; the connection lingers then,
    /// unless the client has already half-closed.
    mutating func responseFinished(reusable: Bool, clientMaySend: Bool = false) -> Action {
        guard case .serving(let serving) = state else { return .none }
        if serving.keepAlive && reusable && !serving.peerClosed {
            state = .idle
            return .readNextRequest
        }
        let linger = clientMaySend && !serving.peerClosed && !serving.shuttingDown
        state = .draining(linger: linger)
        return linger ? .drainThenLinger : .drainThenClose
    }

    /// The queued output has been written.
    mutating func outputDrained() -> Action {
        guard case .draining(let linger) = state else { return .none }
        state = linger ? .lingering : .closed
        return linger ? .linger : .close
    }

    /// Input is read only to be dropped (a finished answer waits to go out, or lingers).
    var discardsInput: Bool {
        state == .draining(linger: true) || state == .lingering
    }

    /// The client closed its side. After a complete request the answer still goes out, and
    /// so does an answer being drained (no lingering after it: the client sends no more).
    mutating func peerClosed(requestComplete: Bool) -> Action {
        switch state {
        case .serving(var serving) where requestComplete:
            serving.peerClosed = true
            state = .serving(serving)
            return .stopReading
        case .draining:
            state = .draining(linger: false)
            return .stopReading
        case .closed:
            return .none
        default:
            state = .closed
            return .close
        }
    }

    /// The server is shutting down: idle and lingering connections close now, busy ones after
    /// their answer, which no lingering follows (it would hold the shutdown for its 30 s).
    mutating func shutdown() -> Action {
        switch state {
        case .handshaking, .idle, .readingHead, .lingering:
            state = .closed
            return .close
        case .serving(var serving):
            serving.keepAlive = false
            serving.shuttingDown = true
            state = .serving(serving)
            return .none
        case .draining(linger: true):
            state = .draining(linger: false)
            return .stopReading
        case .draining(linger: false), .closed:
            return .none
        }
    }

    /// A socket error, a timeout with nobody to answer, or the grace period ended.
    mutating func abort() -> Action {
        guard state != .closed else { return .none }
        state = .closed
        return .close
    }
}
