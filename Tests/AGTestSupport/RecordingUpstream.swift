#if canImport(Glibc)
import Glibc
#endif
import AGHTTP
import Foundation
import AGSync

/// A request as the upstream received it.
public struct UpstreamRecord: Sendable {
    public let method: String
    public let target: String
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// False when the connection closed before a chunked body's last chunk: `body` is what
    /// came before it (the request is recorded all the same).
    public let bodyComplete: Bool
    /// Which accepted connection carried it (1, 2, …).
    public let connection: Int

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// Header names as received, lower-cased.
    public var headerNames: [String] { headers.map { $0.name.lowercased() } }
}

/// What the upstream answers.
public struct UpstreamReply: Sendable {
    public enum Ending: Sendable {
        /// The whole response, then keep-alive.
        case complete
        /// The head announces the full body, half of it is sent, then the connection closes.
        case closeMidBody
        /// Nothing is sent; the connection closes.
        case closeWithoutAnswer
        /// These bytes instead of a rendered response (any framing, even a broken one); the
        /// connection stays open for the next request.
        case raw([UInt8])
        /// These bytes, then the connection closes.
        case rawThenClose([UInt8])
        /// Nothing is sent and the connection stays open until the upstream stops.
        case silence
    }

    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Seconds to wait before answering.
    public var delay: Double
    public var ending: Ending

    public init(status: Int = 200, headers: [(String, String)] = [("Content-Type", "application/json")],
                body: [UInt8] = Array(#"{"ok":true}"#.utf8), delay: Double = 0, ending: Ending = .complete) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
        self.ending = ending
    }
}

/// A real HTTP/1.1 upstream for end-to-end tests: a blocking server on its own threads that
/// records every request (method, target, headers, body, connection) and answers what
/// `reply` says: any status, headers and body, slowly, or cut short.
public final class RecordingUpstream: Sendable {
    public let port: Int
    /// The address it listens on.
    public let address: String
    private let listener: Int32
    private let state = Locked(State())

    private struct State {
        var records: [UpstreamRecord] = []
        var connections = 0
        var open: Set<Int32> = []
        var stopped = false
        var reply: @Sendable (UpstreamRecord) -> UpstreamReply = { _ in UpstreamReply() }
    }

    /// Listens on `address` (any loopback address: 127.0.0.2 is another host to a client) and
    /// `port` (0: chosen by the kernel).
    public init(address: String = "127.0.0.1", port: Int = 0) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        self.address = address
        let addressText = address
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, addressText, &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            let error = errno
            close(listener)
            throw HTTPClientError.io(operation: "upstream bind/listen", errno: error, reason: "cannot listen on \(addressText):\(port)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "recording-upstream"
        thread.start()
    }

    /// Sets how every following request is answered.
    public func reply(_ answer: @escaping @Sendable (UpstreamRecord) -> UpstreamReply) {
        state.withLock { $0.reply = answer }
    }

    /// Every request received so far.
    public var records: [UpstreamRecord] { state.withLock { $0.records } }

    /// Connections accepted so far.
    public var connectionCount: Int { state.withLock { $0.connections } }

    /// `http://<address>:<port>`.
    public var url: String { "http://\(address):\(port)" }

    /// Stops accepting and cuts every open connection. Idempotent.
    ///
    /// A descriptor is shut down here only while this server still owns its number: the
    /// connections under the lock (a connection thread leaves the set under it before it
    /// closes), and the listener is closed by the accept thread alone, once `accept` has
    /// failed. (It was closed here while the accept thread could still be between two calls:
    /// its next `accept` could then take a connection from whichever other test had been given
    /// the number, and close it — the mechanism that fits a client elsewhere seeing "connection
    /// closed before the response was complete".)
    public func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in state.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                // Only `stop()` ends the loop: the listener must stay open (its number ours)
                // until it has been shut down. Other failures (EMFILE…) are retried.
                let failure = errno
                if state.withLock({ $0.stopped }) { return }
                if failure != EINTR && failure != ECONNABORTED { usleep(1000) }
                continue
            }
            let number = state.withLock { state -> Int? in
                guard !state.stopped else { return nil }
                state.connections += 1
                state.open.insert(fd)
                return state.connections
            }
            guard let number else {
                close(fd)
                return
            }
            let thread = Thread { [self] in
                serve(fd, connection: number)
                _ = state.withLock { $0.open.remove(fd) }
                close(fd)
            }
            thread.start()
        }
    }

    private func serve(_ fd: Int32, connection: Int) {
        var reader = SocketReader(fd: fd)
        while let head = reader.readUntil([13, 10, 13, 10]) {
            let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
            let requestLine = lines[0].split(separator: " ")
            guard requestLine.count == 3 else { return }
            var headers: [(name: String, value: String)] = []
            for line in lines.dropFirst() where !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            func value(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
            var body: [UInt8] = []
            var bodyComplete = true
            if value("transfer-encoding")?.lowercased() == "chunked" {
                bodyComplete = false
                while let sizeLine = reader.readUntil([13, 10]) {
                    let size = Int(String(decoding: sizeLine, as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
                    if size == 0 {
                        bodyComplete = reader.readUntil([13, 10]) != nil
                        break
                    }
                    guard let chunk = reader.read(size + 2) else { return }
                    body += chunk.prefix(size)
                }
            } else if let length = value("content-length").flatMap(Int.init), length > 0 {
                guard let bytes = reader.read(length) else { return }
                body = bytes
            }
            let record = UpstreamRecord(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers,
                                        body: body, bodyComplete: bodyComplete, connection: connection)
            let answer = state.withLock { state -> @Sendable (UpstreamRecord) -> UpstreamReply in
                state.records.append(record)
                return state.reply
            }
            let reply = answer(record)
            if reply.delay > 0 { Thread.sleep(forTimeInterval: reply.delay) }
            var response = "HTTP/1.1 \(reply.status) Whatever\r\n"
            for (name, value) in reply.headers { response += "\(name): \(value)\r\n" }
            response += "Content-Length: \(reply.body.count)\r\n\r\n"
            switch reply.ending {
            case .closeWithoutAnswer:
                return
            case .closeMidBody:
                _ = write(fd, Array(response.utf8) + reply.body.prefix(reply.body.count / 2))
                return
            case .complete:
                guard write(fd, Array(response.utf8) + reply.body) else { return }
            case .raw(let bytes):
                guard write(fd, bytes) else { return }
            case .rawThenClose(let bytes):
                _ = write(fd, bytes)
                return
            case .silence:
                // Block until `stop()` shuts the connection down.
                while reader.readUntil([0]) != nil {}
                return
            }
            if value("connection")?.lowercased() == "close" { return }
        }
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }
}

/// Buffered blocking reads from a socket.
private struct SocketReader {
    let fd: Int32
    var buffer: [UInt8] = []

    /// Bytes up to `marker` (excluded; the marker is consumed), or nil at EOF.
    mutating func readUntil(_ marker: [UInt8]) -> [UInt8]? {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for index in searchFrom...(buffer.count - marker.count) where buffer[index] == marker[0] {
                    if Array(buffer[index..<index + marker.count]) == marker {
                        let found = Array(buffer[..<index])
                        buffer.removeFirst(index + marker.count)
                        return found
                    }
                }
                searchFrom = buffer.count - marker.count + 1
            }
            guard receive() else { return nil }
        }
    }

    mutating func read(_ count: Int) -> [UInt8]? {
        while buffer.count < count {
            guard receive() else { return nil }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeFirst(count)
        return bytes
    }

    private mutating func receive() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[..<n]
        return true
    }
}
