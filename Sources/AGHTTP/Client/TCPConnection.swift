#if canImport(Glibc)
import Glibc
#endif

/// One non-blocking IPv4 TCP socket with deadline-bounded connect, send and receive.
///
/// The only type in this module that touches socket APIs and raw pointers. It owns its file
/// descriptor from `init` to `deinit` and is used by one thread at a time.
final class TCPConnection {
    /// The socket, for a caller that waits on several connections at once.
    let descriptor: Int32
    /// Receive buffer reused across reads.
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)
    /// `host:port`, for error messages.
    let address: String

    /// Connects to `ipv4:port`, giving up at `deadline`.
    init(ipv4: String, port: UInt16, deadline: ContinuousClock.Instant) throws(HTTPClientError) {
        address = "\(ipv4):\(port)"
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, ipv4, &socketAddress.sin_addr) == 1 else {
            throw .invalidURL(ipv4)
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
                                    | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw .io("socket", errno) }
        self.descriptor = descriptor
        // From here on `deinit` closes the descriptor on every error path.

        // Requests go out in one write; Nagle would only delay the next request on this connection.
        var enabled: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &enabled, socklen_t(MemoryLayout<Int32>.size))

        let result = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 {
            let code = errno
            guard code == EINPROGRESS else { throw Self.connectError(address: address, code: code) }
            guard try wait(for: Int16(POLLOUT), until: deadline) else { throw .timedOut(phase: "connect") }
            var pending: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &pending, &length) == 0 else {
                throw .io("getsockopt", errno)
            }
            guard pending == 0 else { throw Self.connectError(address: address, code: pending) }
        }
    }

    deinit {
        close(descriptor)
    }

    private static func connectError(address: String, code: Int32) -> HTTPClientError {
        code == ECONNREFUSED
            ? .connectionRefused(address: address)
            : .connectFailed(address: address, errno: code, reason: String(cString: strerror(code)))
    }

    /// Writes all of `bytes`, waiting for the socket to drain until `deadline`.
    func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant) throws(HTTPClientError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                Glibc.send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                offset += written
                continue
            }
            let code = errno
            if written < 0 && (code == EAGAIN || code == EWOULDBLOCK || code == EINTR) {
                guard try wait(for: Int16(POLLOUT), until: deadline) else { throw .timedOut(phase: "send") }
                continue
            }
            if code == EPIPE || code == ECONNRESET { throw .connectionClosed }
            throw .io("send", code)
        }
    }

    /// Appends what the socket has to `buffer`, waiting until `deadline`; returns 0 at end of stream.
    func receive(into buffer: inout [UInt8], deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Int {
        while true {
            let received = scratch.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received >= 0 {
                buffer.append(contentsOf: scratch[..<received])
                return received
            }
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK || code == EINTR {
                guard try wait(for: Int16(POLLIN), until: deadline) else { throw .timedOut(phase: "response") }
                continue
            }
            if code == ECONNRESET { throw .connectionClosed }
            throw .io("recv", code)
        }
    }

    /// Whether an idle connection can carry another request: a readable idle socket means the
    /// server closed it (or sent bytes nobody asked for), either way it must not be reused.
    var isReusable: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// Waits for `events`; false when `deadline` passed first.
    private func wait(for events: Int16, until deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Bool {
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return false }
            let (seconds, attoseconds) = remaining.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { throw .io("poll", errno) }
        }
    }
}
