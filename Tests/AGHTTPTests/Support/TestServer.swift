import Foundation
import AGSync
import AGCrypto
@testable import AGHTTP

/// An `HTTPServer` with a chosen configuration on its own loop, for the hardening tests:
/// counts the requests it was handed and the local replies it rendered.
final class TestServer: @unchecked Sendable {
    // Invariant: `server` is created, used and dropped on `thread`'s loop only; the counters
    // are mutex-guarded.
    let thread = LoopThread()
    private var server: HTTPServer?
    private let socket: ListeningSocket
    private let handled = Locked(0)
    private let finished = Locked(false)
    private let localReplies = Locked<[HTTPLocalError]>([])
    private let localRequests = Locked<[String]>([])
    private let handshakes = Locked<(failures: [TLSHandshakeFailure], versions: [String])>(([], []))
    private let limitReports = Locked<[Int]>([])

    var port: Int { socket.port }
    var requestCount: Int { handled.withLock { $0 } }
    var localErrors: [HTTPLocalError] { localReplies.withLock { $0 } }
    /// The method and path of each locally answered request, as `"METHOD path"`.
    var localRequestLines: [String] { localRequests.withLock { $0 } }
    /// TLS handshakes that failed, and the versions of those that completed.
    var handshakeFailures: [TLSHandshakeFailure] { handshakes.withLock { $0.failures } }
    var handshakeVersions: [String] { handshakes.withLock { $0.versions } }
    var connectionCount: Int { thread.sync { [self] in server?.connectionCount ?? 0 } }
    /// What `connectionLimitReached` reported, in turn (pauses since the previous report).
    var connectionLimitReports: [Int] { limitReports.withLock { $0 } }
    var connectionLimitPauses: Int { thread.sync { [self] in server?.connectionLimitPauses ?? 0 } }
    var connectionsReadingHead: Int { thread.sync { [self] in server?.connectionsReadingHead ?? 0 } }

    /// `handler` runs on the loop for every parsed request; local replies get the gateway-like
    /// envelope with an `X-Request-ID` of `local-<n>`.
    init(_ configuration: HTTPServerConfiguration, tls: HTTPServerTLS? = nil,
         handler: @escaping (HTTPServerRequest) -> Void) throws {
        socket = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        let socket = self.socket
        thread.sync { [self] in
            var delegate = HTTPServerDelegate(localReply: { [self] request, error in
                let count = localReplies.withLock { $0.append(error); return $0.count }
                localRequests.withLock { $0.append("\(request.method) \(request.path)") }
                let body = "{\"error\":\"\(error.message)\",\"code\":\"\(error.code)\",\"requestId\":\"local-\(count)\"}"
                request.respond(status: error.status, headers: HTTPHeaders([("X-Request-ID", "local-\(count)")]), body: Array(body.utf8))
            }, tlsHandshakeFailed: { [self] failure in
                handshakes.withLock { $0.failures.append(failure) }
            }, tlsHandshakeCompleted: { [self] version in
                handshakes.withLock { $0.versions.append(version) }
            })
            delegate.connectionLimitReached = { [self] pauses in limitReports.withLock { $0.append(pauses) } }
            server = HTTPServer(loop: thread.loop, socket: socket, configuration: configuration, delegate: delegate,
                                tls: tls) { [self] request in
                handled.withLock { $0 += 1 }
                handler(request)
            }
        }
    }

    func connect(receiveTimeout: Int = 10) -> BlockingSocket {
        let socket = BlockingSocket.connect(port: port)!
        var tv = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return socket
    }

    /// Starts a graceful shutdown (`HTTPServer.shutdown(grace:)`); `shutdownFinished` turns
    /// true when it completes.
    func beginShutdown(grace: Duration) {
        thread.sync { [self] in
            server?.shutdown(grace: grace) { [self] in finished.withLock { $0 = true } }
        }
    }

    var shutdownFinished: Bool { finished.withLock { $0 } }

    func stop() {
        thread.sync { [self] in server = nil }
        thread.stop()
        socket.close()
    }
}
