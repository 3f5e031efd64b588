#if canImport(Glibc)
import Glibc
#endif

/// Where a tenant's requests go: an HTTP/1.1 origin given as `http://host:port[/base]`.
///
/// Parsed once when a configuration snapshot is built. Only IP literals and `localhost` are
/// accepted as hosts, so connecting never blocks on name resolution.
public struct UpstreamTarget: Sendable, Hashable, CustomStringConvertible {
    /// The host as written, without IPv6 brackets.
    public let host: String
    public let port: Int
    /// The path prefix every forwarded path starts with: empty or `/seg…`, never a trailing `/`.
    public let basePath: String
    /// The resolved socket address; targets with equal addresses share pooled connections.
    let address: UpstreamAddress
    /// The `Host` value used when the gateway sends none.
    let hostHeader: String

    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case unsupportedScheme
        case missingHost
        case unsupportedHost(String)
        case invalidPort(String)
        case invalidPath(String)

        public var description: String {
            switch self {
            case .unsupportedScheme: "upstream URL must start with http://"
            case .missingHost: "upstream URL has no host"
            case .unsupportedHost(let host): "upstream host \(host) is not an IP literal or localhost"
            case .invalidPort(let port): "invalid upstream port \(port)"
            case .invalidPath(let path): "invalid upstream base path \(path)"
            }
        }
    }

    public init(host: String, port: Int, basePath: String = "") throws(ParseError) {
        guard (1...65535).contains(port) else { throw .invalidPort(String(port)) }
        guard let address = UpstreamAddress(host: host, port: UInt16(port)) else { throw .unsupportedHost(host) }
        var base = Substring(basePath)
        while base.last == "/" { base.removeLast() }
        guard base.isEmpty || base.first == "/",
              base.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else { throw .invalidPath(basePath) }
        self.host = host
        self.port = port
        self.basePath = String(base)
        self.address = address
        let bracketed = host.contains(":") ? "[\(host)]" : host
        self.hostHeader = port == 80 ? bracketed : "\(bracketed):\(port)"
    }

    /// Parses `http://host[:port][/base]`; the port defaults to 80.
    public init(url: String) throws(ParseError) {
        guard url.utf8.count > 7, url.prefix(7).equalsIgnoringASCIICase("http://") else { throw .unsupportedScheme }
        let rest = url.dropFirst(7)
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
        var port = 80
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(portText) else { throw .invalidPort(String(portText)) }
            port = value
        }
        try self.init(host: String(host), port: port, basePath: String(path))
    }

    public var description: String { "http://\(hostHeader)\(basePath)" }

    public static func == (lhs: UpstreamTarget, rhs: UpstreamTarget) -> Bool {
        lhs.address == rhs.address && lhs.basePath == rhs.basePath && lhs.host == rhs.host
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(address)
        hasher.combine(basePath)
    }
}

/// A resolved IPv4 or IPv6 socket address, cheap to hash (the pool's key).
struct UpstreamAddress: Hashable, Sendable {
    let isIPv6: Bool
    /// Address bytes in network order; IPv4 uses the first 4 bytes of `high`.
    let high: UInt64
    let low: UInt64
    let port: UInt16

    init?(host: String, port: UInt16) {
        let literal = host.equalsIgnoringASCIICase("localhost") ? "127.0.0.1" : host
        if literal.contains(":") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, literal, &address) == 1 else { return nil }
            let (high, low) = withUnsafeBytes(of: address) {
                ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self))
            }
            self.init(isIPv6: true, high: high, low: low, port: port)
        } else {
            var address = in_addr()
            guard inet_pton(AF_INET, literal, &address) == 1 else { return nil }
            self.init(isIPv6: false, high: UInt64(address.s_addr), low: 0, port: port)
        }
    }

    private init(isIPv6: Bool, high: UInt64, low: UInt64, port: UInt16) {
        self.isIPv6 = isIPv6
        self.high = high
        self.low = low
        self.port = port
    }

    /// Calls `body` with a `sockaddr` for this address, built on the stack.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        if isIPv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) {
                $0.storeBytes(of: high, as: UInt64.self)
                $0.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
            }
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(truncatingIfNeeded: high)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
