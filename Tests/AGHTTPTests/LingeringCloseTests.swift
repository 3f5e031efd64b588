#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGCrypto
import AGTestSupport
@testable import AGHTTP
import Testing

/// Lingering close (RFC 9112 section 9.6): an answer given before the request was read in full
/// (413, an early refusal, a broken chunked body) is followed by a half-close and a bounded
/// read-and-drop, so a client that writes its whole request before reading — Python's
/// http.client, most SDKs — gets the answer instead of a reset. Each test failed before the
/// server lingered: the upload met a reset and the write failed. On threads of their own: they
/// block on sockets, and their 8 MiB uploads must not run beside a test that bounds the
/// process's memory (`.onOwnThreads(exclusive: true)`).
@Suite(.onOwnThreads) struct LingeringCloseTests {
    /// Answers every request with 413 at once, without reading its body.
    static func refuser(_ request: HTTPServerRequest) {
        request.respond(status: 413, headers: HTTPHeaders([("Content-Type", "application/json")]),
                        body: Array(#"{"code":"payload_too_large"}"#.utf8))
    }

    static let upload = [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20)

    @Test func anEarlyAnswerReachesAClientThatWritesItsWholeBodyFirst() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 10)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: \(Self.upload.count)\r\n\r\n"))
        #expect(client.write(Self.upload), "the rest of the upload is read and dropped, not reset")
        let response = try #require(client.readResponse())
        #expect(response.status == 413)
        #expect(response.head.value("Connection") == "close", "the answer says the connection closes")
        #expect(response.text == #"{"code":"payload_too_large"}"#)
        #expect(client.readResponse() == nil, "then the write side is shut")
        client.close()
        #expect(eventually { server.connectionCount == 0 }, "the client's close ends the lingering")
    }

    /// A streamed answer (the proxy's: an upstream answering before it read the body) started
    /// before the body was read says `Connection: close` in its head, as `respond`'s answers do;
    /// an HTTP/1.0 client kept alive was told `Connection: keep-alive` and the connection then
    /// closed under its next request (stop 32, independent upstream sweep).
    @Test(arguments: ["HTTP/1.1", "HTTP/1.0"])
    func aStreamedEarlyAnswerSaysTheConnectionCloses(version: String) throws {
        let server = try TestServer(HTTPServerConfiguration()) { request in
            request.startResponse(status: 200, reason: nil, contentLength: 2) { _ in }
            Array("ok".utf8).withUnsafeBytes { request.writeBody($0) }
            request.endResponse(complete: true)
        }
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 10)
        let keepAlive = version == "HTTP/1.0" ? "Connection: keep-alive\r\n" : ""
        #expect(client.write("POST /up \(version)\r\nHost: h\r\n\(keepAlive)Content-Length: \(Self.upload.count)\r\n\r\n"))
        #expect(client.write(Self.upload), "the rest of the upload is read and dropped, not reset")
        let response = try #require(client.readResponse())
        #expect(response.status == 200)
        #expect(response.head.value("Connection") == "close", "\(version): the head says the connection closes")
        #expect(response.text == "ok")
        #expect(client.readResponse() == nil)
        client.close()
        #expect(eventually { server.connectionCount == 0 })
    }

    @Test func anOverLimitBodyRefusedByCollectBodyIsAnsweredTheSameWay() throws {
        let server = try TestServer(HTTPServerConfiguration()) { request in
            request.collectBody(limit: 1 << 20) { result in
                request.respond(status: result == .failure(.tooLarge) ? 413 : 200, headers: HTTPHeaders(), body: [])
            }
        }
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 10)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: \(Self.upload.count)\r\n\r\n"))
        #expect(client.write(Self.upload))
        #expect(client.readResponse()?.status == 413)
    }

    @Test func aBrokenChunkedBodyIsAnsweredAndTheRestDropped() throws {
        let server = try TestServer(HTTPServerConfiguration()) { request in
            request.collectBody(limit: 64 << 20) { _ in request.respond(status: 400, headers: HTTPHeaders(), body: []) }
        }
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 10)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 junk\r\nhello\r\n"))
        #expect(client.write(Self.upload), "what follows the broken chunk is read and dropped")
        let response = try #require(client.readResponse())
        #expect(response.status == 400)
        #expect(response.head.value("Connection") == "close")
    }

    @Test func aRefusedHeadWithABodyBehindItIsAnsweredTheSameWay() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 10)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: a b\r\nContent-Length: \(Self.upload.count)\r\n\r\n"))
        #expect(client.write(Self.upload))
        let response = try #require(client.readResponse())
        #expect(response.status == 400)
        #expect(server.localErrors.map(\.code) == ["bad_request"])
    }

    @Test func aClientThatStopsSendingIsClosedAfterTheLingeringTimeout() throws {
        var configuration = HTTPServerConfiguration()
        configuration.lingeringTimeout = .milliseconds(300)
        let server = try TestServer(configuration, handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nsome"))
        #expect(client.readResponse()?.status == 413)
        #expect(client.readResponse() == nil, "the write side is shut once the answer is out")
        #expect(server.connectionCount == 1, "a lingering connection still counts")
        let started = ContinuousClock.now
        #expect(eventually(3) { server.connectionCount == 0 })
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test func lingeringEndsAtItsTotalTimeEvenWhileTheClientKeepsSending() throws {
        var configuration = HTTPServerConfiguration()
        configuration.lingeringTimeout = .seconds(5)
        configuration.lingeringTime = .milliseconds(600)
        let server = try TestServer(configuration, handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000000\r\n\r\n"))
        #expect(client.readResponse()?.status == 413)
        let started = ContinuousClock.now
        // A trickle that the between-reads timeout alone would let go on for ever.
        while server.connectionCount > 0, ContinuousClock.now - started < .seconds(4) {
            client.write(Array(repeating: UInt8(ascii: "x"), count: 100))
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(server.connectionCount == 0)
        #expect(ContinuousClock.now - started < .seconds(2), "closed at lingeringTime, not later")
    }

    @Test func lingeringEndsAfterItsByteBound() throws {
        var configuration = HTTPServerConfiguration()
        configuration.lingeringMaxBytes = 1 << 20
        let server = try TestServer(configuration, handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        let upload = [UInt8](repeating: UInt8(ascii: "x"), count: 32 << 20)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: \(upload.count)\r\n\r\n"))
        #expect(!client.write(upload), "dropped up to the bound, then closed: the rest is reset")
        #expect(eventually { server.connectionCount == 0 })
    }

    @Test func shutdownClosesALingeringConnectionAtOnce() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: Self.refuser)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        #expect(client.write("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nsome"))
        #expect(client.readResponse()?.status == 413)
        #expect(server.connectionCount == 1)
        let started = ContinuousClock.now
        server.beginShutdown(grace: .seconds(20))
        #expect(eventually(3) { server.shutdownFinished })
        #expect(ContinuousClock.now - started < .seconds(2), "neither the lingering time nor the grace is waited for")
        #expect(server.connectionCount == 0)
    }

    @Test func aCompleteRequestWithConnectionCloseDoesNotLinger() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: HTTPServerHardeningTests.ok)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        #expect(client.write("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
        #expect(client.readResponse()?.status == 200)
        #expect(client.readResponse() == nil)
        #expect(eventually(2) { server.connectionCount == 0 }, "closed at once, with the client's side still open")
    }

    @Test func anEarlyAnswerOverTLSReachesAClientThatWritesItsWholeBodyFirst() throws {
        let (_, files) = try TLSServerTests.certificate()
        let context = try TLSServerContext(certificateChainFile: files.chain, privateKeyFile: files.key)
        let server = try TestServer(HTTPServerConfiguration(), tls: HTTPServerTLS { context }, handler: Self.refuser)
        defer { server.stop() }
        // CPython's http.client sends the whole body, then reads.
        let body = String(repeating: "0123456789abcdef", count: 4 << 16)
        let result = try TLSTestClient.run(.init(port: server.port, requests: [.init("POST", "/up", body: body)]))
        #expect(result.ok, "\(result.error ?? "")")
        #expect(result.responses?.first?.status == 413)
        #expect(result.responses?.first?.headers["connection"] == "close")
        #expect(eventually { server.connectionCount == 0 })
    }
}
