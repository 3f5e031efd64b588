import AGHTTP

/// One request and its answer, as the routers see it: `HTTPServerRequest` on a real
/// connection, an in-memory exchange in the router harness.
protocol ServerExchange: AnyObject {
    var method: String { get }
    /// The target's path, without the query.
    var path: Substring { get }
    /// The request target exactly as received (path and query).
    var target: String { get }
    var headers: HTTPHeaders { get }
    /// The peer's IP address as text.
    var remoteAddress: String { get }
    var startedAt: ContinuousClock.Instant { get }
    /// Reads the whole body (up to `limit` bytes); completes once, on the loop thread.
    func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void)
    /// Sends a complete answer.
    func respond(status: Int, headers: HTTPHeaders, body: [UInt8])
}

extension HTTPServerRequest: ServerExchange {
    var target: String { head.target }
}
