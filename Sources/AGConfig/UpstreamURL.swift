/// A tenant upstream: `http://host[:port][/base]` or `https://host[:port][/base]`; requests go
/// to `base + request path`. The host is an IP literal or a DNS name (resolved by the workers).
public struct UpstreamURL: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let isIPv6: Bool
    /// 80 (http) or 443 (https) when the URL names none.
    public let port: Int
    /// Empty, or a path starting with `/` and never ending with one.
    public let basePath: String
    /// `https://`: the upstream is reached over TLS and its certificate verified.
    public let isTLS: Bool

    /// Why an upstream URL was refused. The reasons name the part that is wrong without
    /// repeating any of it: a refused URL may hold a secret (a password, a query key) and its
    /// error goes to the log and the admin reload answer.
    enum ParseError: Error, Equatable {
        case scheme
        case credentials
        case forbiddenCharacter
        case authority
        case basePath

        var reason: String {
            switch self {
            case .scheme: "it does not start with http:// or https://"
            case .credentials: "credentials (user:password@) are not accepted"
            case .forbiddenCharacter: "a query (?), a fragment (#), a backslash or white space is not accepted"
            case .authority: "the host or the port is not valid"
            case .basePath: "the base path must be visible ASCII without . or .. segments"
            }
        }
    }

    /// Parses and validates.
    static func parse(_ text: String) -> Result<UpstreamURL, ParseError> {
        let isTLS: Bool
        let rest: Substring
        if text.hasPrefix("https://") {
            isTLS = true
            rest = text.dropFirst("https://".count)
        } else if text.hasPrefix("http://") {
            isTLS = false
            rest = text.dropFirst("http://".count)
        } else {
            return .failure(text.contains("@") ? .credentials : .scheme)
        }
        // Userinfo may hold any byte (`/`, `?`, `#` too): an `@` anywhere is read as credentials.
        guard !rest.contains("@") else { return .failure(.credentials) }
        guard !rest.contains(where: { $0 == "?" || $0 == "#" || $0 == "\\" || $0.isWhitespace })
        else { return .failure(.forbiddenCharacter) }
        guard let authority = HostName.parseAuthority(rest, defaultPort: isTLS ? 443 : 80) else { return .failure(.authority) }
        var base = String(authority.rest)
        while base.hasSuffix("/") { base.removeLast() }
        guard base.allSatisfy(\.isVisibleASCII),
              !base.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
        else { return .failure(.basePath) }
        return .success(UpstreamURL(host: authority.host, isIPv6: authority.isIPv6, port: authority.port,
                                    basePath: base, isTLS: isTLS))
    }

    private init(host: String, isIPv6: Bool, port: Int, basePath: String, isTLS: Bool) {
        self.host = host
        self.isIPv6 = isIPv6
        self.port = port
        self.basePath = basePath
        self.isTLS = isTLS
    }

    /// `host:port` as sent in the upstream `Host` header.
    public var authority: String { HostName.authority(host: host, port: port) }

    public var scheme: String { isTLS ? "https" : "http" }

    public var description: String { "\(scheme)://\(authority)\(basePath)" }
}
