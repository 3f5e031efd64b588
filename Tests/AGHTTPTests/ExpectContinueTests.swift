import Foundation
@testable import AGHTTP
import Testing

/// `Expect: 100-continue` on a real socket: the interim answer goes out when the handler starts
/// reading the body — an empty one too, as nginx sends it (Java 17's HttpClient waits for it
/// forever on a `Content-Length: 0` request: an interop sweep, stop 35) — and never when the
/// handler answers without reading.
@Suite struct ExpectContinueTests {
    static func collecting(_ request: HTTPServerRequest) {
        request.collectBody(limit: 1024) { result in
            let body = (try? result.get()) ?? []
            request.respond(status: 200, headers: HTTPHeaders([("Content-Type", "text/plain")]), body: Array("got \(body.count)".utf8))
        }
    }

    @Test(arguments: [0, 5])
    func theInterimAnswerComesBeforeTheBody(length: Int) throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: Self.collecting)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: \(length)\r\nExpect: 100-continue\r\n\r\n")
        let interim = try #require(client.readHead())
        #expect(interim.startLine == "HTTP/1.1 100 Continue")
        if length > 0 { client.write(String(repeating: "x", count: length)) }
        let response = try #require(client.readResponse(method: "POST"))
        #expect(response.status == 200)
        #expect(response.text == "got \(length)")
    }

    @Test func noInterimAnswerWhenTheHandlerAnswersWithoutReading() throws {
        let server = try TestServer(HTTPServerConfiguration()) { request in
            request.respond(status: 401, headers: HTTPHeaders(), body: [])
        }
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n")
        let response = try #require(client.readResponse(method: "POST"))
        #expect(response.status == 401)
    }

    /// HTTP/1.0 has no interim answers (RFC 9110 section 15.2).
    @Test func noInterimAnswerOnHTTP10() throws {
        let server = try TestServer(HTTPServerConfiguration(), handler: Self.collecting)
        defer { server.stop() }
        let client = server.connect(receiveTimeout: 5)
        client.write("POST /u HTTP/1.0\r\nHost: h\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n")
        let response = try #require(client.readResponse(method: "POST"))
        #expect(response.status == 200)
    }
}
