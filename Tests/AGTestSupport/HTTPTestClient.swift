#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A response as a test sees it.
public struct TestResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object.
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// `code` of an error envelope.
    public var code: String? { json["code"] as? String }
}

public enum HTTPTestClientError: Error, CustomStringConvertible {
    case connect(Int32)
    case io(String)
    case malformed(String)

    public var description: String {
        switch self {
        case .connect(let code): "connect failed: errno \(code)"
        case .io(let what): "I/O failed: \(what)"
        case .malformed(let what): "malformed response: \(what)"
        }
    }
}

/// A blocking HTTP/1.1 client over a real TCP socket, for tests. One connection per instance;
/// requests on it are sequential (keep-alive).
public final class HTTPTestClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    public init(port: Int, host: String = "127.0.0.1", timeoutSeconds: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw HTTPTestClientError.connect(code)
        }
    }

    deinit {
        close(fd)
    }

    /// Sends raw bytes.
    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HTTPTestClientError.io("send errno \(errno)") }
            offset += n
        }
    }

    public func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// Sends a request and reads its response.
    public func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws -> TestResponse {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try write(Array(head.utf8) + (body ?? []))
        return try readResponse(method: method)
    }

    /// Reads one response (Content-Length, chunked, or until close).
    public func readResponse(method: String = "GET") throws -> TestResponse {
        let headEnd = try readUntil([13, 10, 13, 10])
        let headBytes = Array(buffer[..<headEnd])
        buffer.removeFirst(headEnd + 4)
        let lines = String(decoding: headBytes, as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw HTTPTestClientError.malformed(lines[0]) }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let response = TestResponse(status: status, headers: headers, body: [])
        var body: [UInt8] = []
        if method == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status) {
            body = []
        } else if let length = response.header("Content-Length").flatMap(Int.init) {
            try fill(length)
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            while true {
                let lineEnd = try readUntil([13, 10])
                let sizeText = String(decoding: buffer[..<lineEnd], as: UTF8.self).split(separator: ";")[0]
                buffer.removeFirst(lineEnd + 2)
                guard let size = Int(sizeText, radix: 16) else { throw HTTPTestClientError.malformed("chunk size") }
                if size == 0 {
                    _ = try readUntil([13, 10])
                    buffer.removeFirst(2)
                    break
                }
                try fill(size + 2)
                body += buffer[..<size]
                buffer.removeFirst(size + 2)
            }
        } else {
            while try receive() > 0 {}
            body = buffer
            buffer = []
        }
        return TestResponse(status: status, headers: headers, body: body)
    }

    /// True when the server closed the connection (reads EOF).
    /// What a non-blocking send found: how much the socket took (0 when its buffer is full),
    /// or that the peer has closed or reset the connection.
    public enum SendOutcome: Equatable { case sent(Int), closed(Int32) }

    /// Sends what the socket takes now, without waiting (a client that never reads).
    public func sendNow(_ bytes: [UInt8]) -> SendOutcome {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
        if n >= 0 { return .sent(n) }
        let code = errno
        return code == EAGAIN || code == EWOULDBLOCK || code == EINTR ? .sent(0) : .closed(code)
    }

    public func isClosedByPeer() -> Bool {
        (try? receive()) == 0
    }

    private func receive() throws -> Int {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { throw HTTPTestClientError.io("recv errno \(errno)") }
        buffer += chunk[..<n]
        return n
    }

    private func fill(_ count: Int) throws {
        while buffer.count < count {
            guard try receive() > 0 else { throw HTTPTestClientError.io("connection closed early") }
        }
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for index in searchFrom...(buffer.count - marker.count) where buffer[index] == marker[0] {
                    if Array(buffer[index..<index + marker.count]) == marker { return index }
                }
                searchFrom = max(0, buffer.count - marker.count + 1)
            }
            guard try receive() > 0 else { throw HTTPTestClientError.io("connection closed before \(marker)") }
        }
    }
}

extension HTTPTestClient {
    /// One request on a fresh connection.
    public static func send(port: Int, _ method: String, _ target: String, headers: [(String, String)] = [],
                            body: [UInt8]? = nil) throws -> TestResponse {
        try HTTPTestClient(port: port).request(method, target, headers: headers, body: body)
    }

    public static func send(port: Int, _ method: String, _ target: String, headers: [(String, String)] = [],
                            json: String) throws -> TestResponse {
        try HTTPTestClient(port: port).request(method, target, headers: headers + [("Content-Type", "application/json")],
                                               body: Array(json.utf8))
    }
}
