#if canImport(Glibc)
import Glibc
#endif
internal import CEvent
import AGSync

/// A bound, listening TCP socket, shared by every worker's server.
public struct ListeningSocket: Sendable {
    public let fileDescriptor: Int32
    public let port: Int

    public enum BindError: Error, CustomStringConvertible {
        case badAddress(String)
        case system(String, Int32)

        public var description: String {
            switch self {
            case .badAddress(let address): "invalid listen address \(address)"
            case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
            }
        }
    }

    /// One listening socket per worker on the same `host:port`, in one `SO_REUSEPORT` group:
    /// the kernel spreads new connections over the group by their address hash, so every
    /// worker gets its share. With one shared socket, the worker whose loop woke first accepted
    /// every queued connection (libevent accepts until the queue is empty), and under load one
    /// worker carried most connections while the other idled.
    ///
    /// A port already bound by anything, including another gateway's reuse-port group, is
    /// refused as `bind` always refused it: a plain probe bind, which conflicts with every
    /// existing socket on the port, runs first, and the probe and the group's binds run under
    /// one process-wide lock, so two groups of one process can never meet on a port.
    ///
    /// Port 0 needs no probe: the first member binds port 0 itself and listens at once. The
    /// kernel's free-port search never picks a port that has any socket on it (reuse-port
    /// groups included; unless `net.ipv4.ip_autobind_reuse` is set and the range is full), and
    /// from that moment the port is taken, so no other binder of port 0 can land on it. Before,
    /// a probe found the free port and the group bound it after the probe closed: in between,
    /// another probe could find it free too, and two groups then shared the port (once in
    /// 12,000 concurrent group binds when that sequence was stress-run).
    public static func bindGroup(host: String, port: Int, count: Int, backlog: Int32 = 1024) throws(BindError) -> [ListeningSocket] {
        guard count > 1 else { return [try bind(host: host, port: port, backlog: backlog)] }
        return try groupBinding.withLock { bound throws(BindError) -> [ListeningSocket] in
            // Port 0: the members bound explicitly to the port the first one got were refused
            // it ("Address already in use") in whole test runs beside Redis servers and
            // clusters; another socket on the same port, not listening and with SO_REUSEADDR
            // (Redis sets it on its outgoing connections), is the likely holder. Such a port is
            // given up and another one asked for, up to five times.
            var attempts = port == 0 ? 5 : 1
            while true {
                attempts -= 1
                var group: [ListeningSocket] = []
                do throws(BindError) {
                    if port == 0 {
                        group.append(try bind(host: host, port: 0, backlog: backlog, reusePort: true))
                    } else {
                        try bind(host: host, port: port, backlog: backlog, listens: false).close()
                    }
                    let chosen = group.first?.port ?? port
                    while group.count < count { group.append(try bind(host: host, port: chosen, backlog: backlog, reusePort: true)) }
                } catch {
                    for socket in group { socket.close() }
                    if case .system(_, EADDRINUSE) = error, attempts > 0, !group.isEmpty { continue }
                    throw error
                }
                bound += 1
                return group
            }
        }
    }

    /// Serializes `bindGroup`'s probe and binds within the process; counts the groups bound.
    /// (Not a `Locked<Void>`: a zero-sized value shares its address with the lock's own
    /// fields, and ThreadSanitizer reads the inout access to it as a race on them.)
    private static let groupBinding = Locked(0)

    /// Binds `host:port` (IPv4 or IPv6 literal; port 0 picks a free one) and listens.
    public static func bind(host: String, port: Int, backlog: Int32 = 1024, reusePort: Bool = false,
                            listens: Bool = true) throws(BindError) -> ListeningSocket {
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        let family: Int32
        if host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { throw .badAddress(host) }
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: address) { dst.copyMemory(from: $0) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            family = AF_INET6
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let name = host == "localhost" ? "127.0.0.1" : host
            guard inet_pton(AF_INET, name, &address.sin_addr) == 1 else { throw .badAddress(host) }
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: address) { dst.copyMemory(from: $0) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            family = AF_INET
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system("bind \(host):\(port)", code)
        }
        guard !listens || listen(fd, backlog) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system("listen", code)
        }
        evutil_make_socket_nonblocking(fd)
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        let actualPort: UInt16 = withUnsafeBytes(of: actual) { raw in
            // sin_port and sin6_port sit at the same offset.
            raw.load(fromByteOffset: 2, as: UInt16.self).bigEndian
        }
        return ListeningSocket(fileDescriptor: fd, port: Int(actualPort))
    }

    public func close() {
        _ = Glibc.close(fileDescriptor)
    }
}

/// Renders a socket address as an IP string ("127.0.0.1", "::1").
func ipString(_ address: UnsafePointer<sockaddr>?) -> String {
    guard let address else { return "" }
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
            var addr = v4.pointee.sin_addr
            inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count))
            return cString(buffer)
        }
    case AF_INET6:
        return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
            var addr = v6.pointee.sin6_addr
            inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count))
            let text = cString(buffer)
            // Report IPv4-mapped peers in their IPv4 form.
            return text.hasPrefix("::ffff:") && text.contains(".") ? String(text.dropFirst(7)) : text
        }
    default:
        return ""
    }
}

private func cString(_ buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
