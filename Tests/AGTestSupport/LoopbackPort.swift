#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A new TCP socket bound to 127.0.0.1 on a port the kernel picks, and that port.
private func boundLoopbackSocket() -> (descriptor: Int32, port: UInt16) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
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
    return (descriptor, UInt16(bigEndian: address.sin_port))
}

/// A loopback TCP port that is free right now (bound to port 0 and released); the caller may
/// still lose a race for it, which tests that need a dead port do not mind.
public func unusedLoopbackPort() -> UInt16 {
    let (descriptor, port) = boundLoopbackSocket()
    close(descriptor)
    return port
}

/// A loopback TCP port that refuses connections for as long as this object lives: bound and
/// never listened on, so a connect gets `ECONNREFUSED` and no other process or test can take
/// the port meanwhile (with `unusedLoopbackPort` a gateway of a parallel test once did, and a
/// "refused" connection was answered 401).
public final class RefusingPort: Sendable {
    public let port: UInt16
    private let descriptor: Int32

    public init() {
        (descriptor, port) = boundLoopbackSocket()
    }

    deinit { close(descriptor) }
}

/// A loopback TCP port whose listener accepts each connection, reads what the client sends
/// first (a TLS ClientHello, say) and closes it: a peer that goes away in the middle of a
/// handshake. Serves until this object is released.
public final class ClosingAfterFirstReadPort: @unchecked Sendable {
    public let port: UInt16
    private let descriptor: Int32

    public init() {
        (descriptor, port) = boundLoopbackSocket()
        _ = listen(descriptor, 16)
        let listener = descriptor
        let thread = Thread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(client, &buffer, buffer.count, 0)
                close(client)
            }
        }
        thread.start()
    }

    deinit {
        // Wakes the blocked accept (it fails) and ends the thread.
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }
}
