/// Where a listener binds: `host:port`, with IPv6 hosts in brackets (`[::]:8080`).
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// IP literal or DNS name, without brackets.
    public let host: String
    /// 0 asks the kernel for a free port (tests).
    public let port: Int
    public let isIPv6: Bool

    public init?(_ text: String) {
        guard let parts = HostName.splitHostPort(Substring(text)), let portText = parts.port,
              let port = HostName.parsePort(portText)
        else { return nil }
        host = parts.host
        isIPv6 = parts.isIPv6
        self.port = port
    }

    public var description: String { HostName.authority(host: host, port: port) }

    /// The address the listening socket is bound to (`ListeningSocket.bind` in AGHTTP):
    /// `localhost` is 127.0.0.1 and an IPv4-mapped IPv6 address its IPv4 one; `nil` for any
    /// other host name, which `bind` refuses.
    public var boundAddress: IPAddress? {
        host == "localhost" ? .v4(0x7F00_0001) : IPAddress(host)?.unmappingIPv4
    }

    /// Why `other` could not be bound beside this listener, or `nil` when both can: the same
    /// address and port, or a wildcard on the port of an address it covers — `0.0.0.0` every
    /// IPv4 address, `[::]` every address, IPv4 included (IPv6 sockets are bound dual-stack).
    /// Port 0 clashes with nothing: each such bind gets a free port of its own.
    public func clash(with other: ListenAddress) -> String? {
        guard port != 0, port == other.port, let mine = boundAddress, let theirs = other.boundAddress else { return nil }
        if mine == theirs { return "both bind \(HostName.authority(host: mine.description, port: port))" }
        for (wildcard, address) in [(mine, theirs), (theirs, mine)] {
            switch (wildcard, address) {
            case (.v6(0), _): return "[::] takes port \(port) on every address, IPv4 included"
            case (.v4(0), .v4): return "0.0.0.0 takes port \(port) on every IPv4 address"
            default: continue
            }
        }
        return nil
    }
}
