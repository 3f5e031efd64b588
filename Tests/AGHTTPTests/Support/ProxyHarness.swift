import AGDevTools
import Foundation
import AGTestSupport
import AGSync
@testable import AGHTTP

/// A request as the in-process upstream server saw it.
struct RecordedRequest: Sendable {
    var method: String
    var target: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
}

/// A gateway-side `HTTPServer` whose handler forwards everything through an `UpstreamPool`,
/// answering `.failed` outcomes the way the gateway does (status + code), and recording every
/// outcome.
final class ProxyHarness: @unchecked Sendable {
    // Invariant: `server` and `pool` are created, used and dropped on `gateway`'s loop thread
    // only; the other stored properties are immutable or mutex-guarded.
    let gateway = LoopThread()
    private var server: HTTPServer?
    private var pool: UpstreamPool?
    private let socket: ListeningSocket
    private let recordedOutcomes = Locked<[UpstreamOutcome]>([])
    private let recordedUnsent = Locked<[Int]>([])
    /// Every request the server handed over, weakly (read on the loop thread).
    private var handled: [WeakRequest] = []

    var port: Int { socket.port }
    var outcomes: [UpstreamOutcome] { recordedOutcomes.withLock { $0 } }
    /// Bytes of each response still queued for the client when its outcome was reported.
    var unsentAtOutcome: [Int] { recordedUnsent.withLock { $0 } }

    init(target: UpstreamTarget, timeouts: UpstreamTimeouts = UpstreamTimeouts(connect: TestBuild.waitWindow(.seconds(2)),
                                                                   response: TestBuild.waitWindow(.seconds(10))),
         maxBodyBytes: Int = 200 * 1024 * 1024, poolConfiguration: UpstreamPoolConfiguration = UpstreamPoolConfiguration()) throws {
        socket = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        let socket = self.socket
        gateway.sync { [self] in
            let pool = UpstreamPool(loop: gateway.loop, configuration: poolConfiguration)
            self.pool = pool
            server = HTTPServer(loop: gateway.loop, socket: socket, configuration: HTTPServerConfiguration()) { [self] request in
                handled.append(WeakRequest(request))
                // The request lets go of its connection once answered: ask the connection.
                let connection = request.connection
                var headers = HTTPHeaders(request.headers.fields)
                headers.remove("Connection")
                headers.remove("Keep-Alive")
                pool.forward(request, to: target, path: target.basePath + request.head.target, headers: headers,
                             timeouts: timeouts, maxBodyBytes: maxBodyBytes,
                             responseFields: { head, writer in
                                 for field in head.headers where ![.contentLength, .transferEncoding, .connection, .keepAlive].contains(field.name) {
                                     writer.appendField(field, of: head.headers)
                                 }
                             }) { outcome in
                    self.recordedUnsent.withLock { $0.append(connection?.unsentBytes ?? -1) }
                    self.recordedOutcomes.withLock { $0.append(outcome) }
                    if case .failed(let error) = outcome, error != .clientAborted {
                        let body = Array("{\"code\":\"\(Self.code(error))\"}".utf8)
                        request.respond(status: error.status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
                    }
                }
            }
        }
    }

    static func code(_ error: UpstreamError) -> String {
        switch error {
        case .connectFailed, .resolveFailed, .tlsFailed, .connectionReset, .invalidResponse: "upstream_unavailable"
        case .timeout: "upstream_timeout"
        case .bodyTooLarge: "body_too_large"
        case .clientBodyMalformed: "bad_request"
        case .clientAborted: "client_aborted"
        }
    }

    /// Requests handed to the handler that are still alive somewhere.
    var liveRequests: Int { gateway.sync { [self] in handled.filter { $0.request != nil }.count } }

    /// Pool counters, read on the loop thread.
    var openConnections: Int { gateway.sync { [self] in pool?.openConnectionCount ?? 0 } }

    func idleConnections(for target: UpstreamTarget) -> Int {
        gateway.sync { [self] in pool?.idleConnectionCount(for: target) ?? 0 }
    }

    func waitForOutcomes(_ count: Int) -> [UpstreamOutcome] {
        _ = eventually { outcomes.count >= count }
        return outcomes
    }

    func connect() -> BlockingSocket {
        BlockingSocket.connect(port: port)!
    }

    func stop() {
        gateway.sync { [self] in
            server = nil
            pool = nil
        }
        gateway.stop()
        socket.close()
    }
}

final class WeakRequest {
    weak var request: HTTPServerRequest?

    init(_ request: HTTPServerRequest) {
        self.request = request
    }
}

/// An upstream `HTTPServer` on its own event loop that records requests and answers by path:
/// `/echo…` answers 200 (201 for POST) with the request body and a few response fields.
final class EchoUpstream: @unchecked Sendable {
    // Invariant: `server` lives on `thread`'s loop only; records are mutex-guarded.
    let thread = LoopThread()
    private var server: HTTPServer?
    private let socket: ListeningSocket
    private let records = Locked<[RecordedRequest]>([])

    var port: Int { socket.port }
    var requests: [RecordedRequest] { records.withLock { $0 } }
    var target: UpstreamTarget { try! UpstreamTarget(url: "http://127.0.0.1:\(port)") }

    init() throws {
        socket = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        let socket = self.socket
        thread.sync { [self] in
            server = HTTPServer(loop: thread.loop, socket: socket, configuration: HTTPServerConfiguration()) { [self] request in
                request.collectBody(limit: 16 * 1024 * 1024) { result in
                    let body = (try? result.get()) ?? []
                    self.records.withLock {
                        $0.append(RecordedRequest(method: request.method, target: request.head.target,
                                                  headers: request.headers.fields, body: body))
                    }
                    var headers = HTTPHeaders([("Content-Type", "text/plain"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"),
                                               ("X-Upstream", "echo")])
                    headers.add("X-Seen-Method", request.method)
                    request.respond(status: request.method == "POST" ? 201 : 200, headers: headers,
                                    body: body.isEmpty ? Array("hello from upstream".utf8) : body)
                }
            }
        }
    }

    /// Connections the upstream server has open right now.
    var openConnections: Int { thread.sync { [self] in server?.connectionCount ?? 0 } }

    func stop() {
        thread.sync { [self] in server = nil }
        thread.stop()
        socket.close()
    }
}
