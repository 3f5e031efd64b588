#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A bare TCP socket for hostile-client tests: sends without waiting (a client that never
/// reads), and reads whatever arrives until the peer closes.
public final class RawTestSocket {
    private let fd: Int32

    /// What a non-blocking send found: how much the socket took (0 when its buffer is full),
    /// or that the peer has closed or reset the connection.
    public enum SendOutcome: Equatable { case sent(Int), closed(Int32) }

    public init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }

    deinit { close(fd) }

    /// Sends what the socket takes now, without waiting.
    public func sendNow(_ bytes: [UInt8]) -> SendOutcome {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
        if n >= 0 { return .sent(n) }
        let code = errno
        return code == EAGAIN || code == EWOULDBLOCK || code == EINTR ? .sent(0) : .closed(code)
    }

    /// Sends all of `text`, waiting for room.
    public func send(_ text: String) {
        var rest = Array(text.utf8)[...]
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            rest = rest.dropFirst(n)
        }
    }

    /// Sends all of `bytes`, waiting for room, as a client that writes its whole request
    /// before reading does; false when the connection was reset or closed under it.
    public func sendAll(_ bytes: [UInt8]) -> Bool {
        var rest = bytes[...]
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            rest = rest.dropFirst(n)
        }
        return true
    }

    /// How a read to the end ended.
    public enum End: Sendable, Equatable {
        /// An orderly close (FIN).
        case closed
        /// A TCP reset (`ECONNRESET`).
        case reset
        case timedOut
    }

    /// Everything received until the peer closes or resets, or `timeout` passes; `end` says which.
    public func readToEnd(timeout: Duration) -> (bytes: [UInt8], end: End) {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return (received, .closed) }
            if n < 0 { return (received, errno == ECONNRESET ? .reset : .closed) }
            received += chunk[..<n]
        }
        return (received, .timedOut)
    }

    /// Everything received until the peer closes (or resets) or `timeout` passes; `closed` tells which.
    public func readUntilClose(timeout: Duration) -> (bytes: [UInt8], closed: Bool) {
        let (bytes, end) = readToEnd(timeout: timeout)
        return (bytes, end != .timedOut)
    }
}
