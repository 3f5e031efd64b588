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
}
