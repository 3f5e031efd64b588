package import Glibc

/// An IPv4 or IPv6 address: what the resolver returns and what sockets connect to.
///
/// Plain value (16 bytes of storage, cheap to hash), so pools can key connections by it.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable, Hashable {
        case v4
        case v6
    }

    public let family: Family
    /// Address bytes in network order; IPv4 uses the first 4 bytes of `high`.
    private let high: UInt64
    private let low: UInt64

    /// Parses a numeric literal (`127.0.0.1`, `::1`, `fe80::1`); `nil` for anything else,
    /// host names included. Brackets are not part of the literal.
    public init?(_ literal: some StringProtocol) {
        let text = String(literal)
        if text.contains(":") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
            self.init(v6: address)
        } else {
            var address = in_addr()
            guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
            self.init(v4: address)
        }
    }

    init(v4 address: in_addr) {
        family = .v4
        high = UInt64(address.s_addr)
        low = 0
    }

    init(v6 address: in6_addr) {
        family = .v6
        (high, low) = withUnsafeBytes(of: address) {
            ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    /// The canonical text form (`inet_ntop`), without brackets.
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch family {
        case .v4:
            var address = in_addr(s_addr: in_addr_t(truncatingIfNeeded: high))
            inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count))
        case .v6:
            var address = in6Address
            inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `host:port` with IPv6 in brackets, for logs and connection names.
    public func description(port: Int) -> String {
        family == .v6 ? "[\(self)]:\(port)" : "\(self):\(port)"
    }

    /// True for 127.0.0.0/8 and ::1.
    public var isLoopback: Bool {
        switch family {
        case .v4: withUnsafeBytes(of: in_addr_t(truncatingIfNeeded: high)) { $0[0] } == 127
        case .v6: high == 0 && low == UInt64(1).bigEndian
        }
    }

    private var in6Address: in6_addr {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) {
            $0.storeBytes(of: high, as: UInt64.self)
            $0.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return address
    }

    /// Calls `body` with a `sockaddr_in`/`sockaddr_in6` for this address and `port`, built on
    /// the stack, for the wrapper modules that connect sockets.
    package func withSocketAddress<R>(port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch family {
        case .v6:
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6Address
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        case .v4:
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = in_addr_t(truncatingIfNeeded: high)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
    }
}
