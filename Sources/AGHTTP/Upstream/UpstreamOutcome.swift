/// Why forwarding a request failed.
public enum UpstreamError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The TCP connection could not be established (refused, unreachable), on any address.
    case connectFailed(String)
    /// The upstream's host name did not resolve (unknown name, no answer in time).
    case resolveFailed(String)
    /// The TLS handshake with an https upstream failed: its certificate did not verify (roots,
    /// name, validity) or no protocol version or cipher was shared.
    case tlsFailed(String)
    /// The upstream closed or reset the connection before the response was complete.
    case connectionReset
    /// The connect, the response head, or a pause between body reads took too long.
    case timeout
    /// The client's body exceeds the limit given to `forward`.
    case bodyTooLarge
    /// The client's body framing is broken (bad chunk syntax).
    case clientBodyMalformed(String)
    /// The upstream answered with something that is not valid HTTP/1.x.
    case invalidResponse(String)
    /// The client went away.
    case clientAborted

    /// The status the gateway answers with when nothing has been sent to the client yet
    /// (499 for a client that left, as nginx logs it; nobody receives it).
    public var status: Int {
        switch self {
        case .connectFailed, .resolveFailed, .tlsFailed, .connectionReset, .invalidResponse: 502
        case .timeout: 504
        case .bodyTooLarge: 413
        case .clientBodyMalformed: 400
        case .clientAborted: 499
        }
    }

    public var description: String {
        switch self {
        case .connectFailed(let why): "upstream connect failed: \(why)"
        case .resolveFailed(let why): "upstream name not resolved: \(why)"
        case .tlsFailed(let why): "upstream TLS handshake failed: \(why)"
        case .connectionReset: "upstream closed the connection"
        case .timeout: "upstream timed out"
        case .bodyTooLarge: "request body too large"
        case .clientBodyMalformed(let why): "malformed request body: \(why)"
        case .invalidResponse(let why): "invalid upstream response: \(why)"
        case .clientAborted: "client closed the connection"
        }
    }
}

/// How one forwarded request ended, reported exactly once per `forward` call.
public enum UpstreamOutcome: Sendable, Equatable {
    /// The whole upstream response reached the client's output buffer.
    case completed(status: Int, upstreamTime: Duration, bodyBytes: Int)
    /// Nothing was sent to the client: the caller answers (502, 504, 413, 400), unless the
    /// error is `.clientAborted`.
    case failed(UpstreamError)
    /// The response had started and was cut short; the client connection has been closed.
    case interrupted(UpstreamError, status: Int, upstreamTime: Duration, bodyBytes: Int)
}

/// Time limits of one forwarded request.
public struct UpstreamTimeouts: Sendable, Equatable {
    /// Limit for establishing the TCP connection, and for each step of a TLS handshake.
    public var connect: Duration
    /// Limit for the response head once the request is sent, and for every pause between
    /// response body reads (and request body writes).
    public var response: Duration

    public init(connect: Duration, response: Duration) {
        self.connect = connect
        self.response = response
    }
}

/// Limits of one pool.
public struct UpstreamPoolConfiguration: Sendable {
    /// Idle connections kept per upstream address; the oldest are closed beyond it (the pool's
    /// starting `maxIdlePerTarget`; the gateway's default is `proxy.upstream_keepalive`'s).
    public var maxIdlePerTarget = 256
    /// How long a connection may sit idle in the pool before it is closed. Keep it below the
    /// upstreams' own keep-alive timeout so they rarely close a connection under us.
    public var idleTimeout: Duration = .seconds(30)
    /// Bytes buffered in one direction before the sending side is paused (backpressure).
    public var highWatermark = 256 * 1024
    /// Largest accepted upstream response head.
    public var maxResponseHeadBytes = 64 * 1024
    /// How long an address that refused a connection is tried after the others of its host
    /// name (so a dead address costs one failed connect per period, not one per request).
    public var failedAddressBackoff: Duration = .seconds(10)

    public init() {}
}

/// Whoever forwards a request through `UpstreamPool.forward(_:to:timeouts:maxBodyBytes:writeFields:owner:)`:
/// writes the response fields the client gets, and hears how the exchange ended. An object
/// rather than two closures: the exchange keeps a reference to it instead of a closure context
/// allocated per request (the gateway's request context is the owner).
public protocol UpstreamExchangeOwner: AnyObject {
    /// Writes the response fields the client gets, from the upstream's head. It must not write
    /// framing fields or `Connection`, which the server writes.
    func writeResponseFields(_ head: HTTPResponseHead, into writer: inout HTTPHeadWriter)
    /// Called exactly once, on the loop thread, with how the exchange ended. On `.failed`,
    /// nothing has been sent to the client and the owner answers.
    func exchangeEnded(_ outcome: UpstreamOutcome)
}

/// The closure form of an owner (`UpstreamPool`'s convenience `forward`s): with no
/// `responseFields`, every field but the framing ones and `Connection` is relayed.
final class ClosureExchangeOwner: UpstreamExchangeOwner {
    private let responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)?
    private let completion: (UpstreamOutcome) -> Void

    init(responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)?, completion: @escaping (UpstreamOutcome) -> Void) {
        self.responseFields = responseFields
        self.completion = completion
    }

    func writeResponseFields(_ head: HTTPResponseHead, into writer: inout HTTPHeadWriter) {
        if let responseFields {
            responseFields(head, &writer)
            return
        }
        let headers = head.headers
        for field in headers {
            switch field.name {
            // Framing belongs to each hop: the server writes its own for the client.
            case .contentLength, .transferEncoding, .connection: continue
            default: writer.appendField(field, of: headers)
            }
        }
    }

    func exchangeEnded(_ outcome: UpstreamOutcome) {
        completion(outcome)
    }
}
