import AGFormats

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
            case .basePath: "the base path must be RFC 3986 path characters or %XX escapes (not %00), without . or .. segments, plain or escaped"
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
        guard base.split(separator: "/", omittingEmptySubsequences: false).allSatisfy(isPathSegment)
        else { return .failure(.basePath) }
        return .success(UpstreamURL(host: authority.host, isIPv6: authority.isIPv6, port: authority.port,
                                    basePath: base, isTLS: isTLS))
    }

    /// An RFC 3986 path segment (`pchar`s; `@` is refused before) that is no dot segment and holds
    /// none behind an escaped slash or backslash, spelt plainly or percent-encoded (`%2e%2E`: an upstream that decodes before it normalizes would
    /// climb out of the base), and holds no encoded NUL (an independent sweep, stop 36, found
    /// `%2e%2e`, `%00`, `"`, `<>` and `{}` accepted).
    private static func isPathSegment(_ segment: Substring) -> Bool {
        var decoded: [UInt8] = []
        var bytes = segment.utf8.makeIterator()
        while let byte = bytes.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = bytes.next().flatMap(PercentEncoding.hexValue),
                      let low = bytes.next().flatMap(PercentEncoding.hexValue) else { return false }
                let value = high << 4 | low
                guard value != 0 else { return false }
                decoded.append(value)
            } else {
                guard isPathCharacter(byte) else { return false }
                decoded.append(byte)
            }
        }
        // An escaped slash or backslash (`%2F`, `%5C`) splits the decoded segment again, for an
        // upstream that decodes before it splits (`/a%2f..%2fb`: a sweep of this check).
        return !decoded.split(omittingEmptySubsequences: false, whereSeparator: { $0 == 0x2F || $0 == 0x5C })
            .contains { $0.elementsEqual([0x2E]) || $0.elementsEqual([0x2E, 0x2E]) }
    }

    /// RFC 3986 `unreserved`, `sub-delims` and `:` (`pchar` less `pct-encoded`, handled above, and `@`).
    private static func isPathCharacter(_ byte: UInt8) -> Bool {
        PercentEncoding.isUnreserved(byte) || "!$&'()*+,;=:".utf8.contains(byte)
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
