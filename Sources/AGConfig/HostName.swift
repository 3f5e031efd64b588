/// Validation of the host part of listen addresses and URLs.
public enum HostName {
    /// A DNS name (`localhost`, `redis.internal`) made of 1–63 character labels of letters, digits
    /// and inner hyphens; at most 253 characters. An all-numeric last label is refused so that a
    /// mistyped IPv4 address (`256.0.0.1`) is not taken for a name.
    public static func isValidDNSName(_ text: some StringProtocol) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        guard let last = labels.last, !last.allSatisfy(\.isASCIIDigit) else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.count)
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                && label.first != "-" && label.last != "-"
        }
    }

    /// Splits `host:port` / `[v6]:port` into an unbracketed host and the port text; `nil` when the
    /// shape is wrong. The host is validated as an IP literal (IPv6 only in brackets) or DNS name.
    public static func splitHostPort(_ text: Substring) -> (host: String, isIPv6: Bool, port: Substring?)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = text[text.index(after: text.startIndex)..<close]
            guard case .v6 = IPAddress(String(host)) else { return nil }
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return (String(host), true, nil) }
            guard rest.hasPrefix(":") else { return nil }
            return (String(host), true, rest.dropFirst())
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return nil }
        let host = parts[0]
        guard IPAddress(String(host)) != nil || isValidDNSName(host) else { return nil }
        return (String(host), false, parts.count == 2 ? parts[1] : nil)
    }

    /// `host:port`, with an IPv6 host in brackets.
    public static func authority(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// A decimal port 0–65535 without sign or leading zeros.
    public static func parsePort(_ text: Substring) -> Int? {
        guard (1...5).contains(text.count), text.allSatisfy(\.isASCIIDigit),
              text == "0" || !text.hasPrefix("0"), let port = Int(text), port <= 65_535
        else { return nil }
        return port
    }

    /// The authority at the start of a URL remainder (`host[:port]` up to the first `/`), with
    /// `defaultPort` when none is given; ports must be 1–65535. Returns what follows the authority.
    public static func parseAuthority(_ text: Substring, defaultPort: Int)
        -> (host: String, isIPv6: Bool, port: Int, rest: Substring)? {
        let end = text.firstIndex(of: "/") ?? text.endIndex
        guard let parts = splitHostPort(text[..<end]) else { return nil }
        var port = defaultPort
        if let portText = parts.port {
            guard let parsed = parsePort(portText), parsed > 0 else { return nil }
            port = parsed
        }
        return (parts.host, parts.isIPv6, port, text[end...])
    }
}
