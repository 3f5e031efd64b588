#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGTestSupport
@testable import AGHTTP
import Testing

/// What RFC 9110 and 9112 ask of a server beyond parsing, on real sockets: every answer carries
/// a `Date` (RFC 9110 section 6.6.1; a proxied one keeps the upstream's own), an HTTP/1.0
/// client kept alive is told so (RFC 9112 section 9.3), and empty lines before a request line
/// are skipped (RFC 9112 section 2.2). Each test failed before its change.
@Suite struct AnswerFieldsAndEmptyLinesTests {
    // MARK: Date

    @Test func theServersOwnAnswersCarryADate() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: HTTPServerHardeningTests.ok)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        let ok = try #require(client.exchange("GET", "/"))
        #expect(ok.head.values("Date").count == 1)
        #expect(IMFFixdate.isNow(ok.head.value("Date")), "\(ok.head.value("Date") ?? "none")")
        // A refusal from the HTTP layer itself too.
        client.write("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        let refused = try #require(client.readResponse())
        #expect(refused.status == 400)
        #expect(IMFFixdate.isNow(refused.head.value("Date")))
    }

    @Test func aProxiedAnswerKeepsTheUpstreamsDateOrGetsOne() throws {
        let upstream = try ScriptedUpstream { connection, _ in
            while let head = ScriptedUpstream.readRequest(connection) {
                let date = head.startLine.contains("/dated") ? "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" : ""
                guard connection.write("HTTP/1.1 200 OK\r\n\(date)Content-Length: 2\r\n\r\nok") else { return }
            }
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let client = proxy.connect()
        let dated = try #require(client.exchange("GET", "/dated"))
        #expect(dated.head.values("Date") == ["Sun, 06 Nov 1994 08:49:37 GMT"], "the upstream's, unchanged and alone")
        let undated = try #require(client.exchange("GET", "/undated"))
        #expect(undated.head.values("Date").count == 1)
        #expect(IMFFixdate.isNow(undated.head.value("Date")), "\(undated.head.value("Date") ?? "none")")
    }

    @Test func theDateIsFormattedOncePerSecond() {
        var cache = DateFieldCache()
        #expect(String(decoding: cache.value(at: 784_111_777), as: UTF8.self) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(String(decoding: cache.value(at: 784_111_777), as: UTF8.self) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(cache.formatted == 1)
        #expect(String(decoding: cache.value(at: 784_111_778), as: UTF8.self) == "Sun, 06 Nov 1994 08:49:38 GMT")
        #expect(cache.formatted == 2)
        var writer = HTTPHeadWriter()
        cache.appendField(at: 1_796_022_230, to: &writer)
        let text = writer.text
        let wroteDate = writer.wroteDate
        #expect(text == "Date: Mon, 30 Nov 2026 07:03:50 GMT\r\n")
        #expect(wroteDate)
    }

    // MARK: HTTP/1.0 keep-alive

    @Test func anHTTP10ClientKeptAliveIsToldSo() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: HTTPServerHardeningTests.ok)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let kept = try #require(client.readResponse())
        #expect(kept.head.value("Connection") == "keep-alive")
        client.write("GET /b HTTP/1.0\r\n\r\n")
        let closing = try #require(client.readResponse())
        #expect(closing.head.value("Connection") == "close", "without keep-alive HTTP/1.0 closes")
        #expect(client.readResponse() == nil)
        // HTTP/1.1 answers stay as they were: no Connection field when kept alive.
        let modern = server.connect(receiveTimeout: 5)
        #expect(modern.exchange("GET", "/c")?.head.value("Connection") == nil)
    }

    @Test func aProxiedAnswerToAnHTTP10ClientKeptAliveIsToldSo() throws {
        let upstream = try ScriptedUpstream { connection, _ in ScriptedUpstream.keepAliveResponder(connection) }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let client = proxy.connect()
        client.write("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let first = try #require(client.readResponse())
        #expect(first.text == "ok")
        #expect(first.head.value("Connection") == "keep-alive")
        client.write("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(client.readResponse()?.head.value("Connection") == "keep-alive", "the same connection served it")
    }

    // MARK: Empty lines before a request line

    @Test func anEmptyLineBeforeARequestLineIsSkipped() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: HTTPServerHardeningTests.ok)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("\r\nGET /a HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
        // Split across reads, and more than one.
        client.write("\r")
        #expect(eventually { server.connectionCount == 1 })
        client.write("\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
        #expect(server.requestCount == 2)
        #expect(server.localErrors.isEmpty)
    }

    @Test func aCRLFAfterABodyBeforeThePipelinedRequestIsSkipped() throws {
        let server = try TestServer(HTTPServerConfiguration()) { request in
            request.collectBody(limit: 100) { body in
                request.respond(status: 200, headers: HTTPHeaders(), body: (try? body.get()) ?? [])
            }
        }
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi\r\nGET /next HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(client.readResponse()?.text == "hi")
        let next = try #require(client.readResponse())
        #expect(next.status == 200)
        #expect(next.head.value("Connection") == nil, "kept alive")
        #expect(server.requestCount == 2)
    }

    @Test func tooManyEmptyLinesOrABareLFAreStillRefused() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: HTTPServerHardeningTests.ok)
        defer { server.stop() }
        let flood = server.connect(receiveTimeout: 5)
        let lines = String(repeating: "\r\n", count: HTTPServerConnection.maxEmptyLinesBeforeRequest + 1)
        flood.write(lines + "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(flood.readResponse()?.status == 400)
        // A bare LF is no empty line: refused as in every other place of a head.
        let bareLF = server.connect(receiveTimeout: 5)
        bareLF.write("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")
        let refused = try #require(bareLF.readResponse())
        #expect(refused.status == 400)
        #expect(refused.text.contains("bare LF"))
        #expect(server.requestCount == 0)
    }
}
