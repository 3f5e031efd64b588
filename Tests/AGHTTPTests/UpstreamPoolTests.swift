import AGDevTools
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGTestSupport
import AGSync
import Synchronization
import Testing
@testable import AGHTTP

/// End-to-end tests of `UpstreamPool.forward`: a raw-socket client → a gateway `HTTPServer`
/// forwarding through the pool → a real upstream (an `HTTPServer` on another loop, or a
/// scripted raw-socket server). Serialized because two tests bound the process's RSS; those two
/// also run with no other case on its own threads beside them (ConfigKeyEffects' 64 MiB answer,
/// for one, would show in the RSS).
@Suite(.serialized, .onOwnThreads) struct UpstreamPoolTests {
    static let megabyte = 1024 * 1024

    // MARK: Pass-through

    @Test func getPassesStatusHeadersAndBodyThroughWithBasePath() throws {
        let upstream = try EchoUpstream()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)/base"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let response = try #require(client.exchange("GET", "/echo?x=1&y=2", headers: [("Accept", "*/*")]))
        #expect(response.status == 200)
        #expect(response.reason == "OK")
        #expect(response.text == "hello from upstream")
        #expect(response.head.value("X-Upstream") == "echo")
        #expect(response.head.values("Set-Cookie") == ["a=1", "b=2"])
        #expect(response.head.value("Content-Length") == "19")
        #expect(upstream.requests.first?.target == "/base/echo?x=1&y=2")
        #expect(proxy.waitForOutcomes(1).first.map(Self.completedStatus) == 200)
    }

    @Test func postForwardsExactlyTheGivenHeadersInOrder() throws {
        let upstream = try EchoUpstream()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: upstream.target)
        defer { proxy.stop() }

        let client = proxy.connect()
        let body = Array("{\"hello\":1}".utf8)
        let response = try #require(client.exchange("POST", "/echo", headers: [
            ("X-B", "2"), ("x-a", "1"), ("X-B", "3"), ("Cookie", "c=1"), ("Connection", "keep-alive"),
        ], body: body))
        #expect(response.status == 201)
        #expect(response.reason == "Created")
        #expect(response.body == body)
        #expect(response.head.value("X-Seen-Method") == "POST")

        let seen = try #require(upstream.requests.first)
        #expect(seen.method == "POST")
        #expect(seen.body == body)
        // Everything the gateway passed, in order and with duplicates; the pool's own
        // Content-Length replaces the inbound one at the end.
        let expected = [("Host", "test"), ("X-B", "2"), ("x-a", "1"), ("X-B", "3"), ("Cookie", "c=1"), ("Content-Length", "11")]
        #expect(seen.headers.map(\.name) == expected.map(\.0))
        #expect(seen.headers.map(\.value) == expected.map(\.1))
    }

    @Test func reasonPhraseAndChunkedResponsePassThrough() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 418 I'm a teapot\r\nX-Custom: a\r\nTransfer-Encoding: chunked\r\nX-Custom: b\r\n\r\n"
                             + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            ScriptedUpstream.keepAliveResponder(connection)
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let response = try #require(proxy.connect().exchange("GET", "/tea"))
        #expect(response.status == 418)
        #expect(response.reason == "I'm a teapot")
        #expect(response.head.values("X-Custom") == ["a", "b"])
        #expect(response.head.value("Transfer-Encoding") == "chunked")
        #expect(response.text == "hello world")
        #expect(response.complete)
        #expect(proxy.waitForOutcomes(1).first == .completed(status: 418, upstreamTime: Self.anyTime(proxy.outcomes.first), bodyBytes: 11))
    }

    @Test func closeDelimitedResponseIsRechunkedAndNotPooled() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.0 200 OK\r\nX-Old: yes\r\n\r\nuntil the end")
        }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        let proxy = try ProxyHarness(target: target)
        defer { proxy.stop() }

        let client = proxy.connect()
        let response = try #require(client.exchange("GET", "/old"))
        #expect(response.status == 200)
        #expect(response.head.value("Transfer-Encoding") == "chunked")
        #expect(response.text == "until the end")
        // The client connection stays usable; the upstream one was spent.
        #expect(proxy.waitForOutcomes(1).count == 1)
        #expect(eventually { proxy.openConnections == 0 })
        #expect(proxy.idleConnections(for: target) == 0)
    }

    /// RFC 9112 section 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing and
    /// its connection is closed after it, keep-alive or not (an independent sweep saw it pooled;
    /// nginx and HAProxy close it).
    @Test func anHTTP10ResponseWithTransferEncodingIsNotPooled() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            while ScriptedUpstream.readRequest(connection) != nil {
                connection.write("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            }
        }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        let proxy = try ProxyHarness(target: target)
        defer { proxy.stop() }

        let client = proxy.connect()
        let response = try #require(client.exchange("GET", "/te10"))
        #expect(response.status == 200)
        #expect(response.text == "hello")
        #expect(proxy.waitForOutcomes(1).count == 1)
        #expect(eventually { proxy.openConnections == 0 }, "closed, not pooled")
        #expect(proxy.idleConnections(for: target) == 0)
    }

    @Test func bodylessResponsesKeepTheirFraming() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            while let head = ScriptedUpstream.readRequest(connection) {
                if head.startLine.hasPrefix("HEAD") {
                    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
                } else if head.startLine.contains("/nocontent") {
                    connection.write("HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n")
                } else if head.startLine.contains("/cached") {
                    connection.write("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 1234\r\n\r\n")
                } else {
                    connection.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                }
            }
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let head = try #require(client.exchange("HEAD", "/file"))
        #expect(head.status == 200)
        #expect(head.head.value("Content-Length") == "1234")
        let noContent = try #require(client.exchange("GET", "/nocontent"))
        #expect(noContent.status == 204)
        #expect(noContent.head.value("Content-Length") == nil)
        #expect(noContent.head.value("Transfer-Encoding") == nil)
        // A 304's Content-Length (the 200's length, RFC 9110 section 8.6) is relayed, with no
        // body (it was dropped until stop 32: independent sweep).
        let cached = try #require(client.exchange("GET", "/cached"))
        #expect(cached.status == 304)
        #expect(cached.head.value("Content-Length") == "1234")
        #expect(cached.head.value("ETag") == "\"x\"")
        let empty = try #require(client.exchange("GET", "/empty"))
        #expect(empty.status == 200)
        #expect(empty.head.value("Content-Length") == "0")
        #expect(upstream.accepted == 1)
    }

    // MARK: Streaming

    @Test func chunkedRequestBodyIsStreamedBeforeItEnds() throws {
        let firstChunkArrived = DispatchSemaphore(value: 0)
        let seen = Locked<(head: TestHead?, checker: PatternChecker)>((nil, PatternChecker()))
        let upstream = try ScriptedUpstream { connection, _ in
            guard let head = connection.readHead() else { return }
            var checker = PatternChecker()
            var signalled = false
            let ok = connection.readBody(.of(head.headers, defaultUntilClose: false)) { piece in
                checker.consume(piece)
                if !signalled {
                    signalled = true
                    firstChunkArrived.signal()
                }
            }
            seen.withLock { $0 = (head, checker) }
            connection.write(ok ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" : "HTTP/1.1 400 Bad\r\nContent-Length: 0\r\n\r\n")
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let body = TestPattern.bytes(count: 70_000)
        client.write("POST /upload HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        client.write("1000\r\n" + "")
        client.write(Array(body[0..<4096]) + Array("\r\n".utf8))
        // The upstream must see the first chunk while the client still holds the rest.
        #expect(firstChunkArrived.wait(timeout: .now() + 10) == .success)
        let rest = body[4096...]
        client.write(Array(String(rest.count, radix: 16).utf8) + Array("\r\n".utf8) + Array(rest) + Array("\r\n0\r\n\r\n".utf8))
        let response = try #require(client.readResponse())
        #expect(response.status == 200)
        let (head, checker) = seen.withLock { $0 }
        #expect(head?.value("Transfer-Encoding") == "chunked")
        #expect(head?.value("Content-Length") == nil)
        #expect(checker.count == body.count)
        #expect(checker.intact)
    }

    /// 48 MB through a proxy whose RSS may grow by far less than that: a proxy that buffered
    /// the body would grow by at least its size. (The end-to-end suite repeats it through the
    /// real binary, whose RSS no other test shares.)
    @Test(.onOwnThreads(exclusive: true)) func largeUploadStreamsWithBoundedMemory() throws {
        let total = 48 * Self.megabyte
        let result = Locked<PatternChecker?>(nil)
        let upstream = try ScriptedUpstream { connection, _ in
            var checker = PatternChecker()
            guard withUnsafeMutablePointer(to: &checker, { ScriptedUpstream.readRequest(connection, checker: $0) }) != nil else { return }
            result.withLock { $0 = checker }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(String(checker.count).utf8.count)\r\n\r\n\(checker.count)")
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let baseline = residentBytes()
        var peak = baseline
        client.write("PUT /upload HTTP/1.1\r\nHost: test\r\nContent-Length: \(total)\r\n\r\n")
        var piece = [UInt8](repeating: 0, count: 256 * 1024)
        var sent = 0
        while sent < total {
            piece.withUnsafeMutableBytes { TestPattern.fill($0, offset: sent) }
            guard client.write(piece) else { break }
            sent += piece.count
            if sent % (8 * Self.megabyte) == 0 { peak = max(peak, residentBytes()) }
        }
        #expect(sent == total)
        let response = try #require(client.readResponse())
        peak = max(peak, residentBytes())
        #expect(response.status == 200)
        #expect(response.text == String(total))
        let checker = try #require(result.withLock { $0 })
        #expect(checker.count == total)
        #expect(checker.intact)
        #expect(peak - baseline < 32 * Self.megabyte, "RSS grew by \((peak - baseline) / Self.megabyte) MB")
    }

    @Test(.onOwnThreads(exclusive: true)) func largeDownloadStreamsWithBoundedMemory() throws {
        let total = 48 * Self.megabyte
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            var piece = [UInt8](repeating: 0, count: 200_000)
            var sent = 0
            while sent < total {
                let n = min(piece.count, total - sent)
                piece.withUnsafeMutableBytes { TestPattern.fill($0, offset: sent) }
                guard connection.write(Array(String(n, radix: 16).utf8) + [13, 10]),
                      piece.withUnsafeBytes({ connection.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }),
                      connection.write([13, 10]) else { return }
                sent += n
            }
            connection.write("0\r\n\r\n")
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let baseline = residentBytes()
        var peak = baseline
        var checker = PatternChecker()
        var nextSample = 8 * Self.megabyte
        client.write("GET /download HTTP/1.1\r\nHost: test\r\n\r\n")
        let response = try #require(client.readResponse { piece in
            checker.consume(piece)
            if checker.count >= nextSample {
                nextSample += 8 * Self.megabyte
                peak = max(peak, residentBytes())
            }
        })
        #expect(response.status == 200)
        #expect(response.complete)
        #expect(response.head.value("Transfer-Encoding") == "chunked")
        #expect(checker.count == total)
        #expect(checker.intact)
        #expect(peak - baseline < 32 * Self.megabyte, "RSS grew by \((peak - baseline) / Self.megabyte) MB")
        #expect(proxy.waitForOutcomes(1).first.map(Self.completedStatus) == 200)
    }

    // MARK: Connection reuse

    @Test func hundredSequentialRequestsShareOneUpstreamConnection() throws {
        let upstream = try ScriptedUpstream { connection, _ in ScriptedUpstream.keepAliveResponder(connection) }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        let proxy = try ProxyHarness(target: target)
        defer { proxy.stop() }

        var statuses: [Int] = []
        for index in 0..<100 {
            // Half on one client connection, half on fresh ones: the pool is per loop, not per client.
            let client = index < 50 ? sharedClient(proxy) : proxy.connect()
            let body: [UInt8]? = index % 3 == 0 ? Array("payload".utf8) : nil
            statuses.append(client.exchange(body == nil ? "GET" : "POST", "/r\(index)", body: body)?.status ?? 0)
        }
        #expect(statuses == Array(repeating: 200, count: 100))
        #expect(upstream.accepted == 1)
        #expect(proxy.idleConnections(for: target) == 1)
        #expect(proxy.openConnections == 1)
    }

    /// Five requests held by the upstream at once need five connections; once answered, the
    /// pool keeps `maxIdlePerTarget` (2) of them and closes the other three, and the next
    /// requests reuse the kept ones.
    @Test func connectionsBeyondTheIdleLimitAreClosedWhenTheyComeBack() throws {
        let arrived = Atomic<Int>(0)
        let closedByPool = Atomic<Int>(0)
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            arrived.add(1, ordering: .relaxed)
            // Every request waits until all five are in: the pool cannot serve two on one connection.
            _ = eventually(10) { arrived.load(ordering: .relaxed) >= 5 }
            guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") else { return }
            ScriptedUpstream.keepAliveResponder(connection)
            closedByPool.add(1, ordering: .relaxed)
        }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        var configuration = UpstreamPoolConfiguration()
        configuration.maxIdlePerTarget = 2
        let proxy = try ProxyHarness(target: target, poolConfiguration: configuration)
        defer { proxy.stop() }

        let clients = (0..<5).map { _ in proxy.connect() }
        for (index, client) in clients.enumerated() { #expect(client.write("GET /held\(index) HTTP/1.1\r\nHost: test\r\n\r\n")) }
        #expect(clients.map { $0.readResponse(method: "GET")?.status ?? 0 } == [200, 200, 200, 200, 200])
        #expect(upstream.accepted == 5)
        #expect(eventually { proxy.idleConnections(for: target) == 2 && proxy.openConnections == 2 })
        #expect(eventually { closedByPool.load(ordering: .relaxed) == 3 })
        #expect(clients[0].exchange("GET", "/again")?.status == 200)
        #expect(clients[1].exchange("GET", "/again")?.status == 200)
        #expect(upstream.accepted == 5)
    }

    private var clientBox = UncheckedBox<BlockingSocket?>(nil)
    private func sharedClient(_ proxy: ProxyHarness) -> BlockingSocket {
        if let client = clientBox.value { return client }
        let client = proxy.connect()
        clientBox.value = client
        return client
    }

    @Test func idleConnectionClosedByUpstreamIsDroppedAndReplaced() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            // Then close while the connection sits in the pool.
        }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        let proxy = try ProxyHarness(target: target)
        defer { proxy.stop() }

        let client = proxy.connect()
        #expect(client.exchange("GET", "/one")?.status == 200)
        #expect(eventually { proxy.openConnections == 0 })
        #expect(client.exchange("GET", "/two")?.status == 200)
        #expect(upstream.accepted == 2)
    }

    /// An upstream whose first connection answers one request (`first`), then reads the next in
    /// full and goes away without answering it — the race where an upstream closes a keep-alive
    /// connection as a request arrives, or one that acted on a request and then died. Later
    /// connections answer every request (`ok`).
    static func answersOnceThenDropsTheNext() throws -> ScriptedUpstream {
        try ScriptedUpstream { connection, index in
            guard index == 0 else {
                ScriptedUpstream.keepAliveResponder(connection)
                return
            }
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
            _ = ScriptedUpstream.readRequest(connection)
        }
    }

    @Test func requestOnAConnectionTheUpstreamJustClosedIsRetriedOnce() throws {
        let upstream = try Self.answersOnceThenDropsTheNext()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        #expect(client.exchange("GET", "/one")?.text == "first")
        let second = try #require(client.exchange("GET", "/two"))
        #expect(second.status == 200)
        #expect(second.text == "ok")
        #expect(upstream.accepted == 2)
        #expect(proxy.waitForOutcomes(2).map(Self.completedStatus) == [200, 200])
    }

    @Test func bodyAlreadySentIsNotRetried() throws {
        let upstream = try Self.answersOnceThenDropsTheNext()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        #expect(client.exchange("GET", "/one")?.text == "first")
        // PUT: idempotent, so only its body (sent, no longer replayable) keeps it from a retry.
        let second = try #require(client.exchange("PUT", "/two", body: Array("not replayable".utf8)))
        #expect(second.status == 502)
        #expect(second.text.contains("upstream_unavailable"))
        #expect(upstream.accepted == 1)
        #expect(proxy.waitForOutcomes(2).last == .failed(.connectionReset))
    }

    /// The upstream may have read the request and acted on it before it closed: a request that
    /// is not idempotent is never sent twice, even with no body (RFC 9110 section 9.2.2), while
    /// PUT and DELETE are (found by an independent sweep: a bodiless POST ran twice upstream).
    @Test(arguments: [("POST", false), ("PATCH", false), ("PUT", true), ("DELETE", true)])
    func onlyIdempotentRequestsAreRetried(method: String, retried: Bool) throws {
        let upstream = try Self.answersOnceThenDropsTheNext()
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        #expect(client.exchange("GET", "/one")?.text == "first")
        let second = try #require(client.exchange(method, "/two", headers: [("Content-Length", "0")]))
        #expect(second.status == (retried ? 200 : 502))
        #expect(upstream.accepted == (retried ? 2 : 1))
        let outcome = proxy.waitForOutcomes(2).last
        if retried {
            #expect(outcome.map(Self.completedStatus) == 200)
        } else {
            #expect(outcome == .failed(.connectionReset))
        }
    }

    // MARK: Failures before the response

    @Test func upstreamDownIsConnectFailed() throws {
        let unused = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        let port = unused.port
        unused.close()
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(port)"))
        defer { proxy.stop() }

        let response = try #require(proxy.connect().exchange("GET", "/anything"))
        #expect(response.status == 502)
        #expect(response.text.contains("upstream_unavailable"))
        let outcome = try #require(proxy.waitForOutcomes(1).first)
        guard case .failed(.connectFailed) = outcome else {
            Issue.record("expected connectFailed, got \(outcome)")
            return
        }
        #expect(proxy.openConnections == 0)
    }

    /// An upstream response head with more fields than allowed is an invalid response, and the
    /// outcome (logged) says it was the response's head, not a request's.
    @Test func responseWithTooManyFieldsIsAnInvalidResponse() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            let fields = (0..<150).map { "X-F\($0): v\r\n" }.joined()
            connection.write("HTTP/1.1 200 OK\r\n\(fields)Content-Length: 2\r\n\r\nok")
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let response = try #require(proxy.connect().exchange("GET", "/many"))
        #expect(response.status == 502)
        #expect(proxy.waitForOutcomes(1).first == .failed(.invalidResponse("response header section too large")))
    }

    @Test func silentUpstreamTimesOut() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            while ScriptedUpstream.readRequest(connection) != nil {}
        }
        defer { upstream.stop() }
        let timeout = Duration.milliseconds(500)
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"),
                                     timeouts: UpstreamTimeouts(connect: .seconds(2), response: timeout))
        defer { proxy.stop() }

        let client = proxy.connect()
        let started = ContinuousClock.now
        let response = try #require(client.exchange("GET", "/slow"))
        let elapsed = ContinuousClock.now - started
        #expect(response.status == 504)
        #expect(response.text.contains("upstream_timeout"))
        #expect(elapsed >= timeout * 0.9)
        #expect(elapsed < timeout * 2, "answered after \(elapsed)")
        #expect(proxy.waitForOutcomes(1).first == .failed(.timeout))
        #expect(eventually { proxy.openConnections == 0 })
    }

    @Test func declaredBodyOverLimitFailsWithoutConnecting() throws {
        let upstream = try ScriptedUpstream { connection, _ in ScriptedUpstream.keepAliveResponder(connection) }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"), maxBodyBytes: 1000)
        defer { proxy.stop() }

        let client = proxy.connect()
        client.write("POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: 1001\r\n\r\n")
        let response = try #require(client.readResponse())
        #expect(response.status == 413)
        #expect(proxy.waitForOutcomes(1).first == .failed(.bodyTooLarge))
        #expect(upstream.accepted == 0)
        #expect(proxy.openConnections == 0)
    }

    @Test func chunkedBodyOverLimitFailsWhileStreaming() throws {
        let upstream = try ScriptedUpstream { connection, _ in ScriptedUpstream.keepAliveResponder(connection) }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"), maxBodyBytes: 1000)
        defer { proxy.stop() }

        let client = proxy.connect()
        client.write("POST /big HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        client.write("258\r\n" + String(repeating: "a", count: 600) + "\r\n")
        client.write("258\r\n" + String(repeating: "b", count: 600) + "\r\n")
        let response = try #require(client.readResponse())
        #expect(response.status == 413)
        #expect(proxy.waitForOutcomes(1).first == .failed(.bodyTooLarge))
        #expect(eventually { proxy.openConnections == 0 })
    }

    @Test func malformedChunkedBodyIsReported() throws {
        let upstream = try ScriptedUpstream { connection, _ in ScriptedUpstream.keepAliveResponder(connection) }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        client.write("POST /bad HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        let response = try #require(client.readResponse())
        #expect(response.status == 400)
        let outcome = try #require(proxy.waitForOutcomes(1).first)
        guard case .failed(.clientBodyMalformed) = outcome else {
            Issue.record("expected clientBodyMalformed, got \(outcome)")
            return
        }
    }

    // MARK: Failures after the response started

    @Test func upstreamClosingMidBodyCutsTheClient() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            connection.write(TestPattern.bytes(count: 10_000))
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }

        let client = proxy.connect()
        let response = try #require(client.exchange("GET", "/cut"))
        #expect(response.status == 200)
        #expect(response.head.value("Content-Length") == "100000")
        #expect(!response.complete)
        #expect(response.bodyLength == 10_000)
        let outcome = try #require(proxy.waitForOutcomes(1).first)
        guard case .interrupted(.connectionReset, status: 200, _, bodyBytes: 10_000) = outcome else {
            Issue.record("expected interrupted, got \(outcome)")
            return
        }
    }

    /// Whatever ends an exchange — a complete response, a failed connect, the upstream cutting
    /// the body, the client leaving mid-response — lets go of the request once the client's
    /// connection is done with it: the exchange's hooks on the request hold it strongly and
    /// every ending must clear them.
    @Test func everyEndingLetsTheRequestGo() throws {
        let echo = try EchoUpstream()
        defer { echo.stop() }
        let cutting = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            connection.write(TestPattern.bytes(count: 10_000))
        }
        defer { cutting.stop() }
        let endless = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
            let piece = TestPattern.bytes(count: 65521)
            while connection.write(piece) {}
        }
        defer { endless.stop() }
        let unused = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        let closedPort = unused.port
        unused.close()

        for (name, url) in [("completed", "http://127.0.0.1:\(echo.port)"), ("connect failed", "http://127.0.0.1:\(closedPort)"),
                            ("upstream cut", "http://127.0.0.1:\(cutting.port)")] {
            let proxy = try ProxyHarness(target: try UpstreamTarget(url: url))
            defer { proxy.stop() }
            let client = proxy.connect()
            #expect(client.exchange("GET", "/echo") != nil, "\(name)")
            #expect(proxy.waitForOutcomes(1).count == 1, "\(name)")
            client.close()
            #expect(eventually { proxy.liveRequests == 0 }, "\(name): the request is still held")
        }

        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(endless.port)"))
        defer { proxy.stop() }
        let client = proxy.connect()
        client.write("GET /endless HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(client.readHead() != nil)
        client.abort()
        #expect(proxy.waitForOutcomes(1).count == 1)
        #expect(eventually { proxy.liveRequests == 0 }, "client left: the request is still held")
    }

    @Test func clientLeavingMidResponseClosesTheUpstreamConnection() throws {
        let upstreamSawClose = Atomic<Bool>(false)
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
            let piece = TestPattern.bytes(count: 65521)
            while connection.write(piece) {}
            upstreamSawClose.store(true, ordering: .releasing)
        }
        defer { upstream.stop() }
        let target = try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)")
        let proxy = try ProxyHarness(target: target)
        defer { proxy.stop() }

        let client = proxy.connect()
        client.write("GET /endless HTTP/1.1\r\nHost: test\r\n\r\n")
        let head = try #require(client.readHead())
        #expect(head.startLine.hasPrefix("HTTP/1.1 200"))
        var received = 0
        _ = client.readBody(.length(Self.megabyte)) { received += $0.count }
        #expect(received == Self.megabyte)
        client.abort()

        let outcome = try #require(proxy.waitForOutcomes(1).first)
        guard case .interrupted(.clientAborted, status: 200, _, _) = outcome else {
            Issue.record("expected interrupted by the client, got \(outcome)")
            return
        }
        #expect(eventually { proxy.openConnections == 0 })
        #expect(proxy.idleConnections(for: target) == 0)
        #expect(eventually { upstreamSawClose.load(ordering: .acquiring) })
    }

    // MARK: Helpers

    static func completedStatus(_ outcome: UpstreamOutcome) -> Int {
        if case .completed(let status, _, _) = outcome { return status }
        return -1
    }

    /// The upstream time of an outcome, so equality checks can ignore it.
    static func anyTime(_ outcome: UpstreamOutcome?) -> Duration {
        switch outcome {
        case .completed(_, let time, _), .interrupted(_, _, let time, _): time
        default: .zero
        }
    }
}
