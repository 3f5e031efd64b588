/// A complete HTTP response as `BlockingHTTPClient` received it.
public struct HTTPClientResponse: Sendable {
    public let status: Int
    /// Header fields in received order, names as the server wrote them.
    public let headers: [(name: String, value: String)]
    /// The body with any chunked framing removed.
    public let body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// The body decoded as UTF-8 (invalid sequences replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}
