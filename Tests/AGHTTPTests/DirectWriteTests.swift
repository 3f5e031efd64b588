import AGDevTools
import AGTestSupport
import Foundation
import AGSync
@testable import AGHTTP
import Testing

/// Answers are written to the socket inside the call that finishes them, not on a later
/// EV_WRITE round: a socket bufferevent freezes the front of its output buffer, so a plain
/// `evbuffer_write` failed without a system call and every answer cost two `epoll_ctl` calls
/// and an extra loop iteration (strace: 4 `epoll_ctl` per proxied request, now none).
@Suite struct DirectWriteTests {
    @Test func aLocalAnswerLeavesDuringRespond() throws {
        let unsent = Recorded()
        let server = try TestServer(HTTPServerConfiguration()) { request in
            // The request lets go of its connection once answered: ask the connection.
            let connection = request.connection
            request.respond(status: 200, headers: HTTPHeaders([("Content-Type", "text/plain")]), body: Array("ok".utf8))
            unsent.values.withLock { $0.append(connection?.unsentBytes ?? -1) }
        }
        defer { server.stop() }
        let client = server.connect()
        for _ in 0..<3 {
            let response = try #require(client.exchange("GET", "/x"))
            #expect(response.status == 200 && response.text == "ok")
        }
        // The third answer can reach the client before the handler, on the loop thread,
        // records what respond left queued.
        #expect(eventually { unsent.values.withLock { $0.count } == 3 })
        #expect(unsent.values.withLock { $0 } == [0, 0, 0], "nothing left queued once respond returned")
    }

    @Test func aProxiedAnswerLeavesBeforeItsOutcome() throws {
        let upstream = try EchoUpstream()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: upstream.target)
        defer { proxy.stop() }
        let client = proxy.connect()
        for _ in 0..<3 {
            let response = try #require(client.exchange("GET", "/echo"))
            #expect(response.status == 200 && response.text == "hello from upstream")
        }
        _ = proxy.waitForOutcomes(3)
        #expect(proxy.unsentAtOutcome == [0, 0, 0])
    }
}

/// Numbers recorded on the loop thread and read by the test.
private final class Recorded: Sendable {
    let values = Locked<[Int]>([])
}
