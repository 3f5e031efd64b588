public import AGCrypto
public import AGEventLoop

/// Where a tenant's requests go: an HTTP/1.1 origin given as `http://host:port[/base]` or
/// `https://host:port[/base]`.
///
/// Built once when a configuration snapshot is built and shared by every worker (one
/// reference per forwarded request). The host is an IP literal, used as is, or a DNS name,
/// resolved on the worker's loop before connecting (`DNSResolver`: TTL-cached, never blocking).
public final class UpstreamTarget: Sendable, CustomStringConvertible {
    /// The host as written, without IPv6 brackets.
    public let host: String
    public let port: Int
    /// The path prefix every forwarded path starts with: empty or `/seg…`, never a trailing `/`.
    public let basePath: String
    /// Set for an https upstream: the roots its certificate must chain to.
    public let tls: TLSClientContext?
    /// The endpoint of an IP-literal host (`localhost` counts as 127.0.0.1): no resolution.
    let literalEndpoint: UpstreamEndpoint?
    /// What a connection to this upstream must have verified: part of every pool key, so
    /// connections are only reused for the same name and the same roots.
    let tlsPeer: TLSPeer?
    /// The `Host` value used when the gateway sends none.
    let hostHeader: String

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case unsupportedScheme
        case missingHost
        case unsupportedHost(String)
        case invalidPort(String)
        case invalidPath(String)
        /// An https upstream needs the TLS client context it is verified with.
        case missingTLSContext

        public var description: String {
            switch self {
            case .unsupportedScheme: "upstream URL must start with http:// or https://"
            case .missingHost: "upstream URL has no host"
            case .unsupportedHost(let host): "upstream host \(host) is not an IP address or a DNS name"
            case .invalidPort(let port): "invalid upstream port \(port)"
            case .invalidPath(let path): "invalid upstream base path \(path)"
            case .missingTLSContext: "an https upstream needs a TLS client context"
            }
        }
    }

    /// - Parameter tls: the context an https upstream is verified with; nil for plain HTTP.
    public init(host: String, port: Int, basePath: String = "", tls: TLSClientContext? = nil) throws(ParseError) {
        guard (1...65535).contains(port) else { throw .invalidPort(String(port)) }
        let literal = host.equalsIgnoringASCIICase("localhost") ? IPAddress("127.0.0.1") : IPAddress(host)
        guard literal != nil || Self.isDNSName(host) else { throw .unsupportedHost(host) }
        var base = Substring(basePath)
        while base.last == "/" { base.removeLast() }
        guard base.isEmpty || base.first == "/",
              base.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else { throw .invalidPath(basePath) }
        self.host = host
        self.port = port
        self.basePath = String(base)
        self.tls = tls
        // A certificate names the host as written (lower-cased), never `127.0.0.1` for `localhost`.
        let peer = tls.map { TLSPeer(serverName: host.lowercased(), trust: $0.trustIdentity) }
        tlsPeer = peer
        literalEndpoint = literal.map { UpstreamEndpoint(address: $0, port: UInt16(port), tls: peer) }
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let defaultPort = tls == nil ? 80 : 443
        hostHeader = port == defaultPort ? bracketed : "\(bracketed):\(port)"
    }

    /// Parses `http://host[:port][/base]` (port 80 by default) or `https://…` (443, and `tls`
    /// required).
    public convenience init(url: String, tls: TLSClientContext? = nil) throws(ParseError) {
        let isTLS = url.utf8.count > 8 && url.prefix(8).equalsIgnoringASCIICase("https://")
        guard isTLS || (url.utf8.count > 7 && url.prefix(7).equalsIgnoringASCIICase("http://")) else {
            throw .unsupportedScheme
        }
        if isTLS && tls == nil { throw .missingTLSContext }
        let rest = url.dropFirst(isTLS ? 8 : 7)
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let path = rest[authorityEnd...]
        guard !authority.isEmpty else { throw .missingHost }
        guard !authority.contains("@") else { throw .unsupportedHost(String(authority)) }
        let host: Substring
        var portText: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { throw .unsupportedHost(String(authority)) }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { throw .unsupportedHost(String(authority)) }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw .missingHost }
        var port = isTLS ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(portText) else { throw .invalidPort(String(portText)) }
            port = value
        }
        try self.init(host: String(host), port: port, basePath: String(path), tls: isTLS ? tls : nil)
    }

    public var isTLS: Bool { tls != nil }

    public var description: String { "\(isTLS ? "https" : "http")://\(hostHeader)\(basePath)" }

    /// Letters, digits, `-`, `_` and dots in labels of 1–63 characters, at most 253 in all, and
    /// not all digits and dots (a mistyped IPv4 address is not a name).
    private static func isDNSName(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 253, !host.utf8.allSatisfy({ $0 == 0x2E || ($0 >= 0x30 && $0 <= 0x39) })
        else { return false }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
                default: false
                }
            }
        }
    }
}

/// The identity a TLS connection was verified for: the name checked against the certificate
/// and the roots it chains to.
struct TLSPeer: Hashable, Sendable {
    let serverName: String
    let trust: String
}

/// One resolved address of an upstream, and how it is spoken to: the key of pooled connections.
///
/// A class, though a value: an exchange, its connection and the pool each hold the endpoint,
/// and as a struct (an address, a port, two optional strings) every hand-over was a copy and a
/// destroy through value witnesses, ~1,200 instructions per proxied request; now a retain.
/// Equal by value (a host name's endpoints are made anew from each answer), by identity first.
final class UpstreamEndpoint: Hashable, Sendable {
    let address: IPAddress
    let port: UInt16
    let tls: TLSPeer?

    init(address: IPAddress, port: UInt16, tls: TLSPeer?) {
        self.address = address
        self.port = port
        self.tls = tls
    }

    var description: String { address.description(port: Int(port)) }

    static func == (lhs: UpstreamEndpoint, rhs: UpstreamEndpoint) -> Bool {
        lhs === rhs || (lhs.address == rhs.address && lhs.port == rhs.port && lhs.tls == rhs.tls)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(address)
        hasher.combine(port)
        hasher.combine(tls)
    }
}
