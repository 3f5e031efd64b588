#if canImport(Glibc)
import Glibc
#endif
import AGSync
import Foundation

/// A TCP relay on a loopback port in front of a server (Redis): bytes pass both ways unchanged,
/// except that once `hold(next:for:)` armed it, the next client bytes holding the marker (a
/// script's SHA-1, say) wait that long before they go on — a command that reaches the server
/// after its sender gave up on it, as in a stall or a slow network, at a chosen moment.
public final class DelayingRelay: @unchecked Sendable {
    // Invariant: `state` is the only mutable state shared between the relay's threads.
    public let port: UInt16
    private let listener: Int32
    private let targetPort: UInt16
    private let state = Locked((marker: [UInt8]?.none, delay: Duration.zero, held: 0, passed: 0, open: [Int32](), stopped: false))

    public init(targetPort: Int) throws {
        self.targetPort = UInt16(targetPort)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && listen(descriptor, 64) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        listener = descriptor
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in acceptLoop() }.start()
    }

    deinit { stop() }

    /// Holds the next client bytes that contain `marker` for `delay`, once.
    public func hold(next marker: String, for delay: Duration) {
        state.withLock { $0.marker = Array(marker.utf8); $0.delay = delay }
    }

    /// How many times bytes were held.
    public var held: Int { state.withLock { $0.held } }

    /// How many held chunks were then written to the server in full.
    public var passed: Int { state.withLock { $0.passed } }

    /// Stops accepting and closes every relayed connection.
    public func stop() {
        // Under the lock: a pump closes its descriptor under it too, so none shut down here can
        // meanwhile have been closed and reused by another test's socket.
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for descriptor in Set(state.open) { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                close(listener)
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped, connected == 0 else { return false }
                // Listed twice, once per pump (see `pump`).
                state.open += [client, server, client, server]
                return true
            }
            guard accepted else {
                close(client)
                close(server)
                continue
            }
            Thread { [self] in pump(from: client, to: server, watching: true) }.start()
            Thread { [self] in pump(from: server, to: client, watching: false) }.start()
        }
    }

    /// Copies until `source` ends, then passes the end on as a half-close (so the server still
    /// runs what it was sent, then answers and closes) — or, when `destination` refuses bytes,
    /// stops reading `source` too. The second pump of a connection to finish closes both.
    private func pump(from source: Int32, to destination: Int32, watching: Bool) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var tail: [UInt8] = []
        var destinationGone = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            let chunk = Array(buffer[0..<count])
            var heldThis = false
            if watching {
                let seen = tail + chunk
                let delay = state.withLock { state -> Duration? in
                    guard let marker = state.marker, Self.contains(seen, marker) else { return nil }
                    state.marker = nil
                    state.held += 1
                    return state.delay
                }
                if let delay {
                    heldThis = true
                    Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
                }
                tail = Array(seen.suffix(64))
            }
            var sent = 0
            while sent < chunk.count {
                let n = chunk[sent...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { break }
                sent += n
            }
            guard sent == chunk.count else {
                destinationGone = true
                break
            }
            if heldThis { state.withLock { $0.passed += 1 } }
        }
        state.withLock { state in
            if destinationGone {
                shutdown(source, Int32(SHUT_RDWR))
            } else {
                shutdown(destination, Int32(SHUT_WR))
            }
            // Each descriptor of a connection is listed once per pump; the last pump closes both.
            if let index = state.open.firstIndex(of: source) { state.open.remove(at: index) }
            if let index = state.open.firstIndex(of: destination) { state.open.remove(at: index) }
            if !state.open.contains(source) && !state.open.contains(destination) {
                close(source)
                close(destination)
            }
        }
    }

    private static func contains(_ bytes: [UInt8], _ marker: [UInt8]) -> Bool {
        guard bytes.count >= marker.count, !marker.isEmpty else { return false }
        for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
            if bytes[start..<(start + marker.count)].elementsEqual(marker) { return true }
        }
        return false
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(port.bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
