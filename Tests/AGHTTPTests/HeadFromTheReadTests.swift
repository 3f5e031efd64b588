import AGTestSupport
import Foundation
@testable import AGHTTP
import Testing

/// A whole head that arrives into an empty input is taken straight from the read
/// (`HTTPServerConnection.takeHead`, `UpstreamExchange.takeHead`); whatever came with it must
/// reach the input before the handler or the response relay runs, and a head that does not
/// arrive whole goes the usual way.
@Suite struct HeadFromTheReadTests {
    /// Echoes the body (collected) or, without one, the path.
    private static func echo(_ request: HTTPServerRequest) {
        guard request.framing != .none else {
            return request.respond(status: 200, headers: HTTPHeaders([]), body: Array(String(request.path).utf8))
        }
        request.collectBody(limit: 1 << 20) { outcome in
            switch outcome {
            case .success(let body): request.respond(status: 200, headers: HTTPHeaders([]), body: body)
            case .failure: request.respond(status: 400, headers: HTTPHeaders([]), body: [])
            }
        }
    }

    @Test func aBodyAndAPipelinedHeadInTheSameReadReachTheirHandlers() throws {
        let server = try TestServer(HTTPServerConfiguration()) { Self.echo($0) }
        defer { server.stop() }
        let client = server.connect()
        #expect(client.write("POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
            + "GET /second HTTP/1.1\r\nHost: x\r\n\r\n"
            + "POST /third HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
        let answers = (0..<3).map { _ in client.readResponse()?.text }
        #expect(answers == ["hello world", "/second", "abc"])
        #expect(server.requestCount == 3)
    }

    @Test func aHeadInPiecesIsReadTheUsualWay() throws {
        let server = try TestServer(HTTPServerConfiguration()) { Self.echo($0) }
        defer { server.stop() }
        let client = server.connect()
        #expect(client.write("GET /split HTTP/1.1\r\nHo"))
        // Read, and found incomplete, before the rest is sent: two reads, the second into an
        // input that is not empty.
        #expect(eventually { server.connectionsReadingHead == 1 })
        #expect(client.write("st: x\r\n\r\n"))
        #expect(client.readResponse()?.text == "/split")
        // The next head whole, on the same connection: straight from the read again.
        #expect(client.exchange("GET", "/whole")?.text == "/whole")
    }

    @Test func aWholeHeadPastTheLimitIsRefused() throws {
        var configuration = HTTPServerConfiguration()
        configuration.maxHeadBytes = 1024
        let server = try TestServer(configuration) { Self.echo($0) }
        defer { server.stop() }
        let client = server.connect()
        let big = String(repeating: "a", count: 2000)
        #expect(client.write("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n"))
        #expect(client.readResponse()?.status == 431)
        #expect(server.localErrors.map(\.code) == ["header_too_large"])
    }

    @Test func anInterimResponseTheFinalOneAndItsBodyInOneReadAreRelayed() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\nX-Final: yes\r\n\r\nhello")
            _ = ScriptedUpstream.readRequest(connection)
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let response = try #require(proxy.connect().exchange("GET", "/interim"))
        #expect(response.status == 201 && response.text == "hello" && response.head.value("X-Final") == "yes")
    }

    @Test func aProtocolSwitchInTheSameReadIsRefused() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            _ = ScriptedUpstream.readRequest(connection)
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let response = try #require(proxy.connect().exchange("GET", "/switch"))
        #expect(response.status == 502 && response.text.contains("upstream_unavailable"))
    }

    @Test func aBodyPartlyInTheHeadsReadIsCompletedFromTheNextRead() throws {
        let rest = DispatchSemaphore(value: 0)
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello")
            // The rest only once the first part reached the client: two reads for the gateway.
            rest.wait()
            connection.write(" world")
            _ = ScriptedUpstream.readRequest(connection)
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let client = proxy.connect()
        #expect(client.write("GET /parts HTTP/1.1\r\nHost: x\r\n\r\n"))
        let head = try #require(client.readHead())
        #expect(head.value("Content-Length") == "11")
        rest.signal()
        var body: [UInt8] = []
        #expect(client.readBody(.of(head.headers, defaultUntilClose: false)) { body.append(contentsOf: $0) })
        #expect(String(decoding: body, as: UTF8.self) == "hello world")
        #expect(proxy.waitForOutcomes(1).count == 1)
    }

    @Test func bytesPastTheBodyInTheSameReadRetireTheUpstreamConnection() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            while ScriptedUpstream.readRequest(connection) != nil {
                connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK")
            }
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let client = proxy.connect()
        #expect(client.exchange("GET", "/one")?.text == "ok")
        #expect(client.exchange("GET", "/two")?.text == "ok")
        #expect(upstream.accepted == 2)
    }
}
