#if canImport(Glibc)
import Glibc
#endif

/// Why an HTTP exchange failed before a complete response arrived.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL is not `http://host[:port]` with an IPv4 literal or `localhost`.
    case invalidURL(String)
    /// The request itself cannot be sent (bad method, target or header).
    case invalidRequest(String)
    /// Nothing listens at the address (`ECONNREFUSED`).
    case connectionRefused(address: String)
    /// Connecting failed for another reason.
    case connectFailed(address: String, errno: Int32, reason: String)
    /// The deadline passed while `phase` was pending (`"connect"`, `"send"`, `"response"`).
    case timedOut(phase: String)
    /// The server closed the connection before the response was complete.
    case connectionClosed
    /// A socket call failed.
    case io(operation: String, errno: Int32, reason: String)
    /// The response is not valid HTTP/1.x.
    case malformedResponse(String)
    /// The response head or body is larger than the client accepts.
    case responseTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .invalidURL(let url): "invalid URL \(url): expected http://host[:port] with an IPv4 address or localhost"
        case .invalidRequest(let reason): "invalid request: \(reason)"
        case .connectionRefused(let address): "connection refused by \(address)"
        case .connectFailed(let address, let code, let reason): "connect to \(address) failed: \(reason) (errno \(code))"
        case .timedOut(let phase): "timed out waiting for \(phase)"
        case .connectionClosed: "connection closed before the response was complete"
        case .io(let operation, let code, let reason): "\(operation) failed: \(reason) (errno \(code))"
        case .malformedResponse(let reason): "malformed response: \(reason)"
        case .responseTooLarge(let limit): "response larger than \(limit) bytes"
        }
    }

    /// A short stable name for counting failures (load summaries).
    public var kind: String {
        switch self {
        case .invalidURL: "invalid_url"
        case .invalidRequest: "invalid_request"
        case .connectionRefused: "connection_refused"
        case .connectFailed: "connect_failed"
        case .timedOut: "timeout"
        case .connectionClosed: "connection_closed"
        case .io: "io_error"
        case .malformedResponse: "malformed_response"
        case .responseTooLarge: "response_too_large"
        }
    }

    static func io(_ operation: String, _ code: Int32) -> HTTPClientError {
        .io(operation: operation, errno: code, reason: String(cString: strerror(code)))
    }
}
