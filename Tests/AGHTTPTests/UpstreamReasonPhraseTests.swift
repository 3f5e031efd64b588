@testable import AGHTTP
import Testing

/// An upstream's reason phrase reaches the client only when it is clean (issue 9 item 6):
/// one with CR, NUL or another control byte is replaced by the status's own phrase.
@Suite struct UpstreamReasonPhraseTests {
    @Test(arguments: [
        ("Fine\rX-Injected: 1", "OK"), ("Fi\u{0}ne", "OK"), ("Fi\u{1B}[31mne", "OK"), ("Fine\u{7F}", "OK"), ("", "OK"),
        ("Totally Fine", "Totally Fine"),
    ])
    func dirtyReasonPhrasesAreReplaced(_ sent: String, _ relayed: String) throws {
        let upstream = try ScriptedUpstream { connection, _ in
            guard ScriptedUpstream.readRequest(connection) != nil else { return }
            connection.write("HTTP/1.1 200 \(sent)\r\nContent-Length: 2\r\n\r\nok")
            ScriptedUpstream.keepAliveResponder(connection)
        }
        defer { upstream.stop() }
        let proxy = try ProxyHarness(target: try UpstreamTarget(url: "http://127.0.0.1:\(upstream.port)"))
        defer { proxy.stop() }
        let response = try #require(proxy.connect().exchange("GET", "/r"))
        #expect(response.status == 200)
        #expect(response.head.startLine == "HTTP/1.1 200 \(relayed)")
        #expect(response.head.value("X-Injected") == nil)
        #expect(response.text == "ok")
    }
}
