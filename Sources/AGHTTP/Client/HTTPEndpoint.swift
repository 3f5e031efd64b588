/// Where a `BlockingHTTPClient` connects: `http://host[:port]` with an IPv4 literal or `localhost`.
public struct HTTPEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The IPv4 address connected to (`localhost` resolves to `127.0.0.1`).
    public let ipv4: String
    public let port: UInt16
    /// The `Host` header value: the authority as written in the URL.
    public let hostHeader: String

    /// Parses `http://host[:port][/]`; any other scheme, a path, a user part or a name other
    /// than `localhost` is refused, since this client neither resolves names nor speaks TLS.
    public init(url: String) throws(HTTPClientError) {
        let prefix = "http://"
        guard url.hasPrefix(prefix) else { throw .invalidURL(url) }
        var authority = Substring(url.dropFirst(prefix.count))
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.isEmpty, !authority.contains("/"), !authority.contains("@") else { throw .invalidURL(url) }
        let host: Substring
        var port: UInt16 = 80
        if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            let digits = authority[authority.index(after: colon)...]
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let parsed = UInt16(digits), parsed > 0 else {
                throw .invalidURL(url)
            }
            port = parsed
        } else {
            host = authority
        }
        if host.lowercased() == "localhost" {
            ipv4 = "127.0.0.1"
        } else {
            let octets = host.split(separator: ".", omittingEmptySubsequences: false)
            guard octets.count == 4, octets.allSatisfy({ octet in
                !octet.isEmpty && octet.count <= 3 && octet.allSatisfy { $0.isASCII && $0.isNumber }
                    && Int(octet)! <= 255
            }) else { throw .invalidURL(url) }
            ipv4 = String(host)
        }
        self.port = port
        hostHeader = String(authority)
    }

    public var description: String { "http://\(hostHeader)" }
}
