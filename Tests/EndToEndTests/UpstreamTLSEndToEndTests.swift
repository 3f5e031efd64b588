import AGDevTools
import AGTestSupport
import Foundation
import Testing

/// https upstreams through the real gateway (issue 13 item 2), against a real TLS server
/// (`TestTLSUpstream`, CPython's ssl): the certificate verified against the tenant's
/// `upstream_ca` or the system store, SNI sent and the name checked, keep-alive TLS connections
/// pooled. Before this, an https upstream was refused at load time.
@Suite("https upstreams")
struct UpstreamTLSEndToEndTests {
    /// A gateway with one tenant (`/public`, no token) proxying to `upstream`, resolving `api.test`
    /// to 127.0.0.1 with a real DNS server; `upstreamCA` (PEM) becomes the tenant's `upstream_ca`.
    struct Setup {
        let gateway: TestGateway
        let teamID = TestGateway.randomTeamID()
        let dns: TestDNSServer

        init(upstream: String, upstreamCA: String?, workers: Int = 1, name: String = "api.test",
             addresses: [String] = ["127.0.0.1"], gatewayYAML: String = "") async throws {
            dns = try await TestDNSServer.start([name: .init(a: addresses, ttl: 600)])
            gateway = try TestGateway(tenants: ["tls.yaml": TestGateway.tenantYAML(teamID: teamID, extra: """
                upstream: \(upstream)
                \(upstreamCA == nil ? "" : "upstream_ca: ../upstream-ca.pem")
                routes:
                  - { prefix: /public, auth: none }
                """)], gatewayYAML: "resolver: { nameservers: [\"\(dns.nameserver)\"] }\n" + gatewayYAML,
                files: upstreamCA.map { ["upstream-ca.pem": $0] } ?? [:], workers: workers)
        }

        func get(_ path: String = "/public/x") throws -> TestResponse {
            try gateway.send("GET", path, headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")])
        }

        func tlsFailures() throws -> Int {
            let series = "attestgate_upstream_errors_total{tenant=\"\(teamID).com.example.app\",error=\"tls_failed\"} "
            return try gateway.admin("GET", "/metrics").text.split(separator: "\n").filter { $0.hasPrefix(series) }
                .compactMap { Int($0.dropFirst(series.count)) }.reduce(0, +)
        }

        /// The reason the gateway logged for its last upstream failure.
        func loggedReason() -> String {
            let lines = gateway.logText().split(separator: "\n").filter { $0.contains("upstream request failed") }
            guard let line = lines.last,
                  let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return "" }
            return object["reason"] as? String ?? ""
        }
    }

    static func upstream(_ certificate: TLSTestCertificate) throws -> TestTLSUpstream {
        try TestTLSUpstream.start(chainPEM: certificate.chainPEM, keyPEM: try certificate.privateKey.pemRepresentation())
    }

    @Test func anHTTPSUpstreamIsVerifiedAgainstUpstreamCAAndItsConnectionsPooled() async throws {
        let ca = try TestCertificateAuthority.generate(commonName: "attestgate Test Upstream CA")
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)/base", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        for index in 0..<20 {
            let response = try setup.get("/public/\(index)")
            #expect(response.status == 200, "\(response.text)")
            if index == 0 {
                #expect(response.json["sni"] as? String == "api.test", "SNI carries the configured name: \(response.text)")
            }
        }
        #expect(server.requests.map(\.target) == (0..<20).map { "/base/public/\($0)" })
        #expect(server.requests.first?.host == "api.test:\(server.port)")
        #expect(server.acceptedConnections == 1, "twenty requests over one pooled TLS connection")
        #expect(server.events.filter { $0.kind == "handshake" }.map(\.sni) == ["api.test"])
        #expect(try setup.tlsFailures() == 0)
    }

    @Test func aReloadKeepsWarmTLSConnectionsWhileTheRootsStayTheSame() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        #expect(try setup.get().status == 200)
        #expect(try setup.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try setup.get().status == 200)
        #expect(server.acceptedConnections == 1, "same roots: the pooled connection is still the tenant's")

        // Other roots (the same CA and one more) are another trust: a fresh, verified connection.
        let extra = try TestCertificateAuthority.generate().certificate.pemRepresentation
        try (ca.certificate.pemRepresentation + extra).write(toFile: setup.gateway.directory + "/upstream-ca.pem",
                                                             atomically: true, encoding: .utf8)
        #expect(try setup.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try setup.get().status == 200)
        #expect(server.acceptedConnections == 2)
    }

    @Test func largeBodiesStreamBothWaysOverOneTLSConnection() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        let client = try HTTPTestClient(port: setup.gateway.port, timeoutSeconds: 60)
        let tenant = [("X-Team-ID", setup.teamID), ("X-Bundle-ID", "com.example.app")]
        // Several times the pool's 256 KiB watermark: the TLS write path must drain and resume.
        let upload = [UInt8](repeating: 0x61, count: 4 << 20)
        let posted = try client.request("POST", "/public/upload", headers: tenant, body: upload)
        #expect(posted.status == 200, "\(posted.text.prefix(200))")
        #expect(posted.json["received"] as? Int == upload.count)
        let downloaded = try client.request("GET", "/public/big/\(6 << 20)", headers: tenant)
        #expect(downloaded.status == 200)
        #expect(downloaded.body.count == 6 << 20)
        #expect(downloaded.body.allSatisfy { $0 == 0x78 })
        #expect(try client.request("GET", "/public/after", headers: tenant).status == 200)
        #expect(server.acceptedConnections == 1, "the connection survived both and was pooled")
    }

    @Test func anAddressThatRefusesIsSkippedBeforeTheHandshake() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        // Nothing listens on 127.0.0.2: its TCP connect is refused, which is no TLS failure.
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation,
                                    addresses: ["127.0.0.2", "127.0.0.1"])
        defer { setup.gateway.stop() }
        let response = try setup.get()
        #expect(response.status == 200, "\(response.text) \(setup.loggedReason())")
        #expect(server.requests.count == 1)
        #expect(try setup.tlsFailures() == 0)

        // An address that refuses is a connect failure, not a TLS one (it used to be counted
        // and logged as "upstream TLS handshake failed: error:00000005:lib(0)::reason(5)").
        let dead = try await Setup(upstream: "https://127.0.0.2:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { dead.gateway.stop() }
        let refused = try dead.get()
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(try dead.tlsFailures() == 0)
        #expect(eventually { dead.loggedReason().hasPrefix("upstream connect failed") }, "\(dead.loggedReason())")

        // An upstream that accepts and closes during the handshake: a connect failure too (the
        // next address may serve), logged as what it was, not "connection refused" (the sweep
        // of stop 34's changes).
        let closing = ClosingAfterFirstReadPort()
        let cut = try await Setup(upstream: "https://127.0.0.1:\(closing.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { cut.gateway.stop() }
        #expect(try cut.get().status == 502)
        #expect(try cut.tlsFailures() == 0)
        #expect(eventually { cut.loggedReason().contains("connection closed during the TLS handshake") }, "\(cut.loggedReason())")
    }

    @Test func aCertificateForAnotherNameIsRefused() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["other.test"], ipAddresses: ["127.0.0.1"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        let refused = try setup.get()
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(refused.json["requestId"] as? String == refused.header("X-Request-ID"))
        #expect(server.requests.isEmpty, "nothing was sent to an upstream that is not api.test")
        #expect(eventually { server.events.contains { $0.kind == "handshake_failed" || $0.kind == "handshake" } })
        #expect(server.events.first { $0.kind.hasPrefix("handshake") }?.sni == "api.test", "SNI was sent")
        #expect(try setup.tlsFailures() == 1)
        #expect(eventually { setup.loggedReason().contains("hostname mismatch") }, "\(setup.loggedReason())")
    }

    /// A response whose body ends with the connection is whole only when the upstream ended
    /// its TLS session with close_notify (RFC 9112 section 9.8); cut without it, the client gets
    /// it cut — its chunked copy without the last chunk — and the failure is counted (stop 34,
    /// independent TLS sweep: it was passed on as complete, which a forged FIN could exploit).
    @Test func aBodyEndedByTheConnectionIsWholeOnlyAfterCloseNotify() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        func fetch(_ how: String) throws -> String {
            let socket = try RawTestSocket(port: setup.gateway.port)
            socket.send("GET /public/until-close/\(how)/5000 HTTP/1.1\r\nHost: gw\r\nX-Team-ID: \(setup.teamID)\r\n"
                        + "X-Bundle-ID: com.example.app\r\nConnection: close\r\n\r\n")
            return String(decoding: socket.readUntilClose(timeout: .seconds(10)).bytes, as: UTF8.self)
        }
        let whole = try fetch("notify")
        #expect(whole.hasPrefix("HTTP/1.1 200") && whole.hasSuffix("\r\n0\r\n\r\n") && whole.contains(String(repeating: "x", count: 1000)),
                "\(whole.prefix(300))")
        let cut = try fetch("cut")
        #expect(cut.hasPrefix("HTTP/1.1 200") && cut.contains(String(repeating: "x", count: 1000)), "\(cut.prefix(300))")
        #expect(!cut.hasSuffix("\r\n0\r\n\r\n"), "a cut body is not ended as a whole one: \(cut.suffix(40))")
        let series = "attestgate_upstream_errors_total{tenant=\"\(setup.teamID).com.example.app\",error=\"connection_reset\"} 1"
        #expect(try eventually { try setup.gateway.admin("GET", "/metrics").text.contains(series) })

        // An HTTP/1.0 client has no chunked coding to tell a cut body by: the connection's end
        // must (stop 34, sweep of this stop's changes: it ended with the same orderly close as a
        // whole body, under TLS with close_notify). Whole: an orderly close; cut: a reset.
        func fetch10(_ how: String) throws -> (text: String, end: RawTestSocket.End) {
            let socket = try RawTestSocket(port: setup.gateway.port)
            socket.send("GET /public/until-close/\(how)/5000 HTTP/1.0\r\nHost: gw\r\nX-Team-ID: \(setup.teamID)\r\n"
                        + "X-Bundle-ID: com.example.app\r\n\r\n")
            let (bytes, end) = socket.readToEnd(timeout: .seconds(10))
            return (String(decoding: bytes, as: UTF8.self), end)
        }
        let whole10 = try fetch10("notify")
        #expect(whole10.text.hasPrefix("HTTP/1.1 200") && whole10.text.hasSuffix(String(repeating: "x", count: 5000)), "\(whole10.text.prefix(200))")
        #expect(whole10.end == .closed)
        #expect(try fetch10("cut").end == .reset)
        // What was sent before the reset arrives whole: the close waits for the kernel to send
        // it (a reset right away threw megabytes away; the sweep of this stop's fixes).
        let socket = try RawTestSocket(port: setup.gateway.port)
        socket.send("GET /public/until-close/cut/4000000 HTTP/1.0\r\nHost: gw\r\nX-Team-ID: \(setup.teamID)\r\n"
                    + "X-Bundle-ID: com.example.app\r\n\r\n")
        let large = socket.readToEnd(timeout: .seconds(20))
        let headEnd = try #require(large.bytes.firstRange(of: Array("\r\n\r\n".utf8)))
        #expect(large.end == .reset && large.bytes.count - headEnd.upperBound == 4_000_000, "\(large.end), \(large.bytes.count - headEnd.upperBound) bytes")
        // A copy with a Content-Length shows its cut itself: an orderly close, no reset.
        let framed = try RawTestSocket(port: setup.gateway.port)
        framed.send("GET /public/short/5000 HTTP/1.0\r\nHost: gw\r\nX-Team-ID: \(setup.teamID)\r\n"
                    + "X-Bundle-ID: com.example.app\r\n\r\n")
        let short = framed.readToEnd(timeout: .seconds(10))
        let text = String(decoding: short.bytes, as: UTF8.self)
        #expect(short.end == .closed && text.contains("Content-Length: 10000") && text.hasSuffix(String(repeating: "x", count: 5000)),
                "\(short.end): \(text.prefix(200))")
    }

    /// The same answer cut by the gateway itself — its shutdown grace ends mid-body — to an
    /// HTTP/1.0 client: a reset, not the orderly close of a whole body (the sweep of stop 34's
    /// fixes: only cuts by the upstream were reset).
    @Test func aBodyCutByTheShutdownEndsWithAReset() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation,
                                    gatewayYAML: "server:\n  listen: \"127.0.0.1:0\"\n  workers: 1\n  shutdown_grace: 300ms\n")
        let socket = try RawTestSocket(port: setup.gateway.port)
        socket.send("GET /public/stall/3000 HTTP/1.0\r\nHost: gw\r\nX-Team-ID: \(setup.teamID)\r\nX-Bundle-ID: com.example.app\r\n\r\n")
        #expect(eventually { server.requests.count == 1 })
        usleep(200_000)
        setup.gateway.stop()
        let (bytes, end) = socket.readToEnd(timeout: .seconds(10))
        #expect(String(decoding: bytes, as: UTF8.self).hasSuffix(String(repeating: "x", count: 3000)))
        #expect(end == .reset)
    }

    @Test func aCertificateThatDoesNotChainToUpstreamCAIsRefused() async throws {
        let trusted = try TestCertificateAuthority.generate(commonName: "attestgate Trusted CA")
        let other = try TestCertificateAuthority.generate(commonName: "attestgate Other CA")
        let server = try Self.upstream(try other.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: trusted.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        let refused = try setup.get()
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(server.requests.isEmpty)
        #expect(try setup.tlsFailures() == 1)
        #expect(eventually { setup.loggedReason().contains("certificate") }, "\(setup.loggedReason())")
    }

    @Test func wildcardsCoverOneWholeLabelAndExpiredCertificatesAreRefused() async throws {
        let ca = try TestCertificateAuthority.generate()
        let cases: [(TLSTestCertificate, String?)] = [
            (try ca.issueTLSServerCertificate(dnsNames: ["*.svc.test"]), nil),
            (try ca.issueTLSServerCertificate(dnsNames: ["ap*.svc.test"]), "hostname mismatch"),
            (try ca.issueTLSServerCertificate(dnsNames: ["*.test"]), "hostname mismatch"),
            // The name only in the subject's CN, no DNS subjectAltName (RFC 9525 section 6.3: not
            // matched; stop 34, independent TLS sweep: OpenSSL's fallback had accepted it).
            (try ca.issueTLSServerCertificate(dnsNames: [], ipAddresses: ["192.0.2.1"], commonName: "api.svc.test"), "hostname mismatch"),
            (try ca.issueTLSServerCertificate(dnsNames: ["api.svc.test"], validDays: 2, now: Date().addingTimeInterval(-5 * 86_400)),
             "certificate has expired"),
        ]
        for (certificate, refusal) in cases {
            let server = try Self.upstream(certificate)
            let setup = try await Setup(upstream: "https://api.svc.test:\(server.port)", upstreamCA: ca.certificate.pemRepresentation,
                                        name: "api.svc.test")
            defer { setup.gateway.stop() }
            let response = try setup.get()
            guard let refusal else {
                #expect(response.status == 200, "\(response.text) \(setup.loggedReason())")
                continue
            }
            #expect(response.status == 502)
            #expect(response.code == "upstream_unavailable")
            #expect(server.requests.isEmpty)
            #expect(eventually { setup.loggedReason().contains(refusal) }, "\(refusal): \(setup.loggedReason())")
        }
    }

    @Test func withoutUpstreamCATheSystemStoreDecidesAndRefusesATestCA() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"]))
        let setup = try await Setup(upstream: "https://api.test:\(server.port)", upstreamCA: nil)
        defer { setup.gateway.stop() }
        let refused = try setup.get()
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(server.requests.isEmpty)
        #expect(try setup.tlsFailures() == 1)
        #expect(eventually { setup.loggedReason().contains("certificate verify failed: self-signed certificate in certificate chain") }, "\(setup.loggedReason())")
    }

    @Test func anIPLiteralIsCheckedAgainstTheCertificatesAddressesWithoutSNI() async throws {
        let ca = try TestCertificateAuthority.generate()
        let server = try Self.upstream(try ca.issueTLSServerCertificate(dnsNames: ["api.test"], ipAddresses: ["127.0.0.1"]))
        let setup = try await Setup(upstream: "https://127.0.0.1:\(server.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { setup.gateway.stop() }
        let response = try setup.get()
        #expect(response.status == 200, "\(response.text)")
        #expect(server.events.filter { $0.kind == "handshake" }.map(\.sni) == [nil], "no SNI for an address (RFC 6066)")

        // The same server reached at a name its certificate lacks is refused.
        let named = try ca.issueTLSServerCertificate(dnsNames: ["api.test"])
        let other = try Self.upstream(named)
        let mismatch = try await Setup(upstream: "https://127.0.0.1:\(other.port)", upstreamCA: ca.certificate.pemRepresentation)
        defer { mismatch.gateway.stop() }
        let refused = try mismatch.get()
        #expect(refused.status == 502)
        #expect(refused.code == "upstream_unavailable")
        #expect(try mismatch.tlsFailures() == 1)
    }
}
