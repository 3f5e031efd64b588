import AGTestSupport

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

/// The device tests' view of the suite's one fake HTTP server, `RecordingUpstream`: a handler
/// from `TestRequest` to `TestReply`, with every byte of the answer under the test's control.
final class TestHTTPServer: Sendable {
    private let upstream: RecordingUpstream

    init(handler: @escaping @Sendable (TestRequest) -> TestReply) throws {
        upstream = try RecordingUpstream()
        upstream.reply { record in
            let request = TestRequest(method: record.method, path: record.target, headers: record.headers, body: record.body)
            return handler(request).upstreamReply
        }
    }

    var port: UInt16 { UInt16(upstream.port) }
    var url: String { upstream.url }
    /// Connections accepted so far.
    var connectionsAccepted: Int { upstream.connectionCount }
    /// Requests parsed so far.
    var requestsServed: Int { upstream.records.count }

    func stop() {
        upstream.stop()
    }
}

extension TestReply {
    var upstreamReply: UpstreamReply {
        switch self {
        case .raw(let bytes): UpstreamReply(ending: .raw(bytes))
        case .rawThenClose(let bytes): UpstreamReply(ending: .rawThenClose(bytes))
        case .silence: UpstreamReply(ending: .silence)
        case .close: UpstreamReply(ending: .closeWithoutAnswer)
        }
    }
}
