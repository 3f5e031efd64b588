import AGSync
import AGTestSupport
@testable import AGHTTP
import Testing

/// A handler may keep its request after the answer or after the client left (a Redis reply or an
/// upstream still on its way). The request reaches its connection through an unowned reference
/// that the connection takes back when the request stops being current, so such a late call
/// writes nothing and never touches a connection that is gone (an unowned read of a freed
/// connection traps).
@Suite struct RequestLifetimeTests {
    @Test func aRequestKeptPastItsClosedConnectionWritesNothing() throws {
        let kept = Kept()
        let server = try TestServer(HTTPServerConfiguration()) { request in kept.keep(request) }
        defer { server.stop() }
        let client = server.connect()
        #expect(client.write("GET /late HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(eventually { kept.count == 1 })
        // A reset (a plain close is a half-close: the answer would still be owed).
        client.abort()
        // Closed and dropped by the server: nothing but the kept request could reach it.
        #expect(eventually { server.connectionCount == 0 })
        let linked = server.thread.sync { () -> Bool in
            let request = kept.requests[0]
            request.respond(status: 200, headers: HTTPHeaders([]), body: Array("too late".utf8))
            request.flushResponse()
            request.bodyPaused = false
            return request.connection != nil
        }
        #expect(!linked)
        #expect(server.thread.sync { kept.requests[0].pendingOutput } == 0)
    }

    @Test func anAnsweredRequestLetsGoOfItsConnection() throws {
        let kept = Kept()
        let server = try TestServer(HTTPServerConfiguration()) { request in
            kept.keep(request)
            request.respond(status: 200, headers: HTTPHeaders([]), body: Array("\(kept.count)".utf8))
        }
        defer { server.stop() }
        let client = server.connect()
        #expect(client.exchange("GET", "/one")?.text == "1")
        // A second answer from the first request, while the second is current, must not reach
        // the client ahead of the second's own.
        server.thread.sync {
            let first = kept.requests[0]
            #expect(first.connection == nil)
            first.respond(status: 500, headers: HTTPHeaders([]), body: Array("stale".utf8))
        }
        let second = client.exchange("GET", "/two")
        #expect(second?.status == 200 && second?.text == "2")
        let linked = server.thread.sync { kept.requests.map { $0.connection != nil } }
        #expect(linked == [false, false])
    }
}

/// Requests the handler kept. Invariant: `requests` is touched on the server's loop thread only
/// (the handler, `thread.sync`); the test thread reads `count`.
private final class Kept: @unchecked Sendable {
    private(set) var requests: [HTTPServerRequest] = []
    private let kept = Locked(0)
    var count: Int { kept.withLock { $0 } }

    func keep(_ request: HTTPServerRequest) {
        requests.append(request)
        kept.withLock { $0 = requests.count }
    }
}
