import AGHTTP

/// One request and its answer, as the routers see it: `HTTPServerRequest` on a real
/// connection, an in-memory exchange in the router harness.
protocol ServerExchange: AnyObject {
    var method: String { get }
    /// The target's path, without the query.
    var path: Substring { get }
    /// The request target exactly as received (path and query).
    var target: String { get }
    /// The header fields as received (byte ranges over the head; `headers[.xTeamID]` or
    /// `headers["Name"]` give a value as a `String` on demand).
    var headers: HTTPFields { get }
    /// The peer's IP address as text.
    var remoteAddress: String { get }
    var startedAt: ContinuousClock.Instant { get }
    /// Reads the whole body (up to `limit` bytes); completes once, on the loop thread.
    func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void)
    /// Sends a complete answer, its header fields written by `fields` into the head.
    func respond(status: Int, body: [UInt8], fields: (inout HTTPHeadWriter) -> Void)
    /// Whether the request can no longer be answered (its connection closed meanwhile).
    var isFinished: Bool { get }
}

extension HTTPServerRequest: ServerExchange {
    var target: String { head.target }
}
