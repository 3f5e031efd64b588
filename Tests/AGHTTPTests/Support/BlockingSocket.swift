#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGTestSupport

/// How a test-side message body is delimited.
enum TestFraming: Equatable {
    case none
    case length(Int)
    case chunked
    case untilClose

    /// Framing of a message from its header fields (`untilClose` when nothing says otherwise
    /// and `defaultUntilClose`: responses; requests default to no body).
    static func of(_ headers: [(name: String, value: String)], defaultUntilClose: Bool) -> TestFraming {
        if headers.contains(where: { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            return .chunked
        }
        if let length = headers.first(where: { $0.name.lowercased() == "content-length" }).flatMap({ Int($0.value) }) {
            return .length(length)
        }
        return defaultUntilClose ? .untilClose : .none
    }
}

/// A parsed message head as seen on the wire by a test client or a scripted upstream.
struct TestHead {
    var startLine: String
    var headers: [(name: String, value: String)]

    func value(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    func values(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }
}

/// A blocking TCP socket with a read buffer: the tests' HTTP/1.1 client and scripted upstreams.
final class BlockingSocket {
    let fd: Int32
    // Bytes `start..<end` of `buffer` are received and not yet taken. The buffer is only
    // ever moved with memmove and filled by recv: per-element array appends, unoptimized in a
    // debug build, made a 48 MB body cost tens of seconds of CPU here.
    private var buffer = [UInt8](repeating: 0, count: 2 * BlockingSocket.readSize)
    private var start = 0
    private var end = 0
    private var closed = false
    private static let readSize = 65536

    /// `receiveTimeout` defaults to 30 s, 120 s under a sanitizer: the 48 MB streaming tests'
    /// upstream checks every byte, and under TSan it finished after the client's 30 s had run
    /// out (docs/security.md, "Fuzzing and sanitizer runs").
    init(fd: Int32, receiveTimeout: Int = TestBuild.sanitizer == nil ? 30 : 120) {
        self.fd = fd
        var tv = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    static func connect(port: Int) -> BlockingSocket? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            Glibc.close(fd)
            return nil
        }
        // A head and body written separately must not wait for a delayed ACK.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return BlockingSocket(fd: fd)
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Closes with a reset (SO_LINGER 0), as a client that crashes or gives up does.
    func abort() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    @discardableResult
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { write($0) } }

    @discardableResult
    func write(_ text: String) -> Bool { write(Array(text.utf8)) }

    private var available: Int { end - start }

    /// Reads more bytes into the buffer; false on EOF, error or timeout.
    private func fill() -> Bool {
        if start == end {
            (start, end) = (0, 0)
        } else if start > 0 && buffer.count - end < Self.readSize {
            let (from, count) = (start, end - start)
            buffer.withUnsafeMutableBytes { _ = memmove($0.baseAddress!, $0.baseAddress! + from, count) }
            (start, end) = (0, count)
        }
        if buffer.count - end < Self.readSize {
            buffer += [UInt8](repeating: 0, count: buffer.count)
        }
        let free = end
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + free, Self.readSize, 0) }
        guard n > 0 else { return false }
        end += n
        return true
    }

    private func take(_ count: Int, into sink: (UnsafeRawBufferPointer) -> Void) {
        buffer.withUnsafeBytes { sink(UnsafeRawBufferPointer(rebasing: $0[start..<start + count])) }
        start += count
    }

    /// Reads one CRLF-terminated line, without the CRLF.
    func readLine() -> String? {
        while true {
            if let lf = buffer[start..<end].firstIndex(of: 0x0A) {
                var lineEnd = lf
                if lineEnd > start, buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let line = String(decoding: buffer[start..<lineEnd], as: UTF8.self)
                start = lf + 1
                return line
            }
            guard fill() else { return nil }
        }
    }

    /// Reads a message head; nil if the peer closed first.
    func readHead() -> TestHead? {
        guard let startLine = readLine() else { return nil }
        var headers: [(name: String, value: String)] = []
        while let line = readLine() {
            if line.isEmpty { return TestHead(startLine: startLine, headers: headers) }
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return nil
    }

    /// Reads a body, handing each piece to `sink`; false if it ended early or was malformed.
    func readBody(_ framing: TestFraming, sink: (UnsafeRawBufferPointer) -> Void) -> Bool {
        switch framing {
        case .none:
            return true
        case .length(let length):
            return readExactly(length, sink: sink)
        case .untilClose:
            while true {
                if available > 0 { take(available, into: sink) }
                guard fill() else { return true }
            }
        case .chunked:
            while true {
                guard let line = readLine() else { return false }
                let digits = line.prefix { $0.isHexDigit }
                guard let size = Int(digits, radix: 16) else { return false }
                if size == 0 {
                    while let trailer = readLine() {
                        if trailer.isEmpty { return true }
                    }
                    return false
                }
                guard readExactly(size, sink: sink), readLine() == "" else { return false }
            }
        }
    }

    private func readExactly(_ count: Int, sink: (UnsafeRawBufferPointer) -> Void) -> Bool {
        var remaining = count
        while remaining > 0 {
            if available == 0, !fill() { return false }
            let n = min(available, remaining)
            take(n, into: sink)
            remaining -= n
        }
        return true
    }
}

/// A response as received by the test client.
struct TestResponse {
    var head: TestHead
    var body: [UInt8]
    var bodyLength: Int
    /// False when the connection ended before the framing said the body was complete.
    var complete: Bool

    var status: Int { Int(head.startLine.split(separator: " ")[1]) ?? 0 }
    var reason: String { head.startLine.split(separator: " ", maxSplits: 2).dropFirst(2).first.map(String.init) ?? "" }
    var text: String { String(decoding: body, as: UTF8.self) }
}

extension BlockingSocket {
    /// Reads one response; with a `sink`, body bytes go there instead of into `body`.
    func readResponse(method: String = "GET", sink: ((UnsafeRawBufferPointer) -> Void)? = nil) -> TestResponse? {
        guard let head = readHead() else { return nil }
        let status = Int(head.startLine.split(separator: " ")[1]) ?? 0
        let framing: TestFraming = method == "HEAD" || status == 204 || status == 304
            ? .none : .of(head.headers, defaultUntilClose: true)
        var body: [UInt8] = []
        var length = 0
        let complete = readBody(framing) { piece in
            length += piece.count
            if let sink { sink(piece) } else { body.append(contentsOf: piece) }
        }
        return TestResponse(head: head, body: body, bodyLength: length, complete: complete)
    }

    /// Sends a request head (and body) built from parts, then reads the response.
    func exchange(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) -> TestResponse? {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        guard write(text) else { return nil }
        if let body, !body.isEmpty, !write(body) { return nil }
        return readResponse(method: method)
    }
}
