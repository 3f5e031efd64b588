#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A request as the test server parsed it.
struct TestRequest: Sendable {
    let method: String
    let path: String
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What the test server does with a request.
enum TestReply: Sendable {
    /// Writes these bytes and keeps reading requests on the connection.
    case raw([UInt8])
    /// Writes these bytes, then closes the connection.
    case rawThenClose([UInt8])
    /// Answers nothing and holds the connection open (until the server stops).
    case silence
    /// Closes the connection without answering.
    case close

    /// A Content-Length response.
    static func response(status: Int, headers: [(String, String)] = [], body: [UInt8] = [],
                         closing: Bool = false) -> TestReply {
        var head = "HTTP/1.1 \(status) X\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n"
        if closing { head += "Connection: close\r\n" }
        let bytes = Array((head + "\r\n").utf8) + body
        return closing ? .rawThenClose(bytes) : .raw(bytes)
    }

    static func json(status: Int = 200, _ text: String) -> TestReply {
        response(status: status, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
    }

    /// A chunked response with the given chunks and a trailer field.
    static func chunked(status: Int = 200, _ chunks: [String]) -> TestReply {
        var text = "HTTP/1.1 \(status) OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        for chunk in chunks {
            text += String(chunk.utf8.count, radix: 16) + ";ext=1\r\n" + chunk + "\r\n"
        }
        text += "0\r\nX-Trailer: yes\r\n\r\n"
        return .raw(Array(text.utf8))
    }
}

/// A tiny threaded HTTP/1.1 server on 127.0.0.1 with an ephemeral port, written on raw
/// sockets so that tests control every byte of the response and the connection's fate.
final class TestHTTPServer: Sendable {
    let port: UInt16
    private let listener: Int32
    private let handler: @Sendable (TestRequest) -> TestReply
    private let openDescriptors = Mutex<Set<Int32>>([])
    private let stopped = Atomic<Bool>(false)
    private let accepted = Atomic<Int>(0)
    private let served = Atomic<Int>(0)

    /// Connections accepted so far.
    var connectionsAccepted: Int { accepted.load(ordering: .sequentiallyConsistent) }
    /// Requests parsed so far.
    var requestsServed: Int { served.load(ordering: .sequentiallyConsistent) }

    init(handler: @escaping @Sendable (TestRequest) -> TestReply) throws {
        self.handler = handler
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 128) == 0 else { throw TestServerError.setup(errno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Stops accepting and closes every open connection.
    func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        openDescriptors.withLock { descriptors in
            for descriptor in descriptors { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    deinit {
        stop()
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else {
                if errno == EINTR { continue }
                return
            }
            accepted.add(1, ordering: .sequentiallyConsistent)
            openDescriptors.withLock { _ = $0.insert(descriptor) }
            let thread = Thread { [self] in
                serve(descriptor)
                openDescriptors.withLock { _ = $0.remove(descriptor) }
                close(descriptor)
            }
            thread.start()
        }
    }

    private func serve(_ descriptor: Int32) {
        var buffer = [UInt8]()
        while let request = readRequest(descriptor, &buffer) {
            served.add(1, ordering: .sequentiallyConsistent)
            switch handler(request) {
            case .raw(let bytes):
                guard write(descriptor, bytes) else { return }
            case .rawThenClose(let bytes):
                _ = write(descriptor, bytes)
                return
            case .silence:
                var scratch = [UInt8](repeating: 0, count: 1024)
                while scratch.withUnsafeMutableBytes({ recv(descriptor, $0.baseAddress, $0.count, 0) }) > 0 {}
                return
            case .close:
                return
            }
        }
    }

    private func write(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    private func readRequest(_ descriptor: Int32, _ buffer: inout [UInt8]) -> TestRequest? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while true {
            if buffer.count >= 4 {
                headEnd = (0...(buffer.count - 4)).first { Array(buffer[$0..<($0 + 4)]) == terminator }
                if headEnd != nil { break }
            }
            guard receive(descriptor, &buffer) else { return nil }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        let lines = head.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3 else { return nil }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let length = headers.first { $0.name.lowercased() == "content-length" }.flatMap { Int($0.value) } ?? 0
        while buffer.count < length {
            guard receive(descriptor, &buffer) else { return nil }
        }
        let body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return TestRequest(method: String(requestLine[0]), path: String(requestLine[1]), headers: headers, body: body)
    }

    private func receive(_ descriptor: Int32, _ buffer: inout [UInt8]) -> Bool {
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        let count = scratch.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffer += scratch[..<count]
        return true
    }
}

enum TestServerError: Error {
    case setup(Int32)
}

/// A loopback port nothing listens on: bound, then released.
func unusedLoopbackPort() -> UInt16 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            _ = bind(descriptor, pointer, length)
            return getsockname(descriptor, pointer, &length)
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
