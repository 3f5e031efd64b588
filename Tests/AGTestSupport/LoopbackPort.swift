#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP port that is free right now (bound to port 0 and released); the caller may
/// still lose a race for it, which tests that need a dead port do not mind.
public func unusedLoopbackPort() -> UInt16 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            _ = bind(descriptor, pointer, length)
            return getsockname(descriptor, pointer, &length)
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
