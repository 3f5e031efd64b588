/// A tenant upstream: `http://host[:port][/base]`; requests go to `base + request path`.
public struct UpstreamURL: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let isIPv6: Bool
    /// 80 when the URL names none.
    public let port: Int
    /// Empty, or a path starting with `/` and never ending with one.
    public let basePath: String

    /// Why an upstream URL was refused.
    enum ParseError: Error, Equatable {
        case httpsUnsupported
        case malformed
    }

    /// Parses and validates; https is reported apart so the message can say why it is refused.
    static func parse(_ text: String) -> Result<UpstreamURL, ParseError> {
        if text.lowercased().hasPrefix("https://") { return .failure(.httpsUnsupported) }
        guard text.hasPrefix("http://") else { return .failure(.malformed) }
        let rest = text.dropFirst("http://".count)
        guard !rest.contains(where: { $0 == "?" || $0 == "#" || $0 == "@" || $0 == "\\" || $0.isWhitespace })
        else { return .failure(.malformed) }
        guard let authority = HostName.parseAuthority(rest, defaultPort: 80) else { return .failure(.malformed) }
        var base = String(authority.rest)
        while base.hasSuffix("/") { base.removeLast() }
        guard base.allSatisfy(\.isVisibleASCII),
              !base.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
        else { return .failure(.malformed) }
        return .success(UpstreamURL(host: authority.host, isIPv6: authority.isIPv6, port: authority.port,
                                    basePath: base))
    }

    private init(host: String, isIPv6: Bool, port: Int, basePath: String) {
        self.host = host
        self.isIPv6 = isIPv6
        self.port = port
        self.basePath = basePath
    }

    /// `host:port` as sent in the upstream `Host` header.
    public var authority: String { HostName.authority(host: host, port: port) }

    public var description: String { "http://\(authority)\(basePath)" }
}
