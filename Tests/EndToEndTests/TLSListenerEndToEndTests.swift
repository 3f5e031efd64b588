#if canImport(Glibc)
import Glibc
#endif
import AGDevTools
import AGGateway
import AGTestSupport
import Foundation
import Testing

/// `server.tls` on the real gateway (issue 9 item 1): it used to be parsed, reported OK by
/// check-config even for a garbage certificate, and ignored — the port spoke plain HTTP. Now
/// the port speaks TLS (1.2+, ALPN http/1.1) with a real client, certificates rotate by reload
/// without dropping connections, bad files are refused at load with `file:line`, and upstreams
/// learn the request came over https.
@Suite struct TLSListenerEndToEndTests {
    /// A certificate for localhost/127.0.0.1 from a fresh test CA, as `files:` for the config
    /// directory (`server.pem`, `server-key.pem`, `server-ca.pem`).
    static func certificate() throws -> (TLSTestCertificate, [String: String]) {
        let authority = try TestCertificateAuthority.generate(commonName: "attestgate Test TLS CA")
        let issued = try authority.issueTLSServerCertificate(dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], validDays: 30)
        return (issued, ["server.pem": issued.chainPEM, "server-key.pem": try issued.privateKey.pemRepresentation(),
                         "server-ca.pem": issued.issuer.pemRepresentation])
    }

    static func tlsServer(handshake: String = "10s", extra: String = "") -> String {
        """
        server:
          listen: "127.0.0.1:0"
          workers: 2
          shutdown_grace: 2s
          tls: { cert: server.pem, key: server-key.pem }
          timeouts: { tls_handshake: \(handshake) }
        \(extra)
        """
    }

    static func proxyTenant(teamID: String, upstream: RecordingUpstream) -> String {
        TestGateway.tenantYAML(teamID: teamID, extra: """
            upstream: http://127.0.0.1:\(upstream.port)
            routes:
              - prefix: /public
                auth: none
            """)
    }

    @Test func keepAliveOverTLSReachesTheUpstreamAsHTTPS() throws {
        let (issued, files) = try Self.certificate()
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["p.yaml": Self.proxyTenant(teamID: teamID, upstream: upstream)],
                                      gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        let tenant = ["X-Team-ID": teamID, "X-Bundle-ID": "com.example.app"]
        var options = TLSTestClient.Options(port: gateway.port, caFile: gateway.directory + "/server-ca.pem",
                                            serverHostname: "localhost",
                                            requests: [.init("GET", "/healthz"), .init("GET", "/public/a", headers: tenant),
                                                       .init("POST", "/public/b", headers: tenant, body: "payload"),
                                                       .init("GET", "/public/c", headers: tenant.merging(["X-Forwarded-Proto": "http"]) { $1 })])
        options.alpn = ["h2", "http/1.1"]
        let result = try TLSTestClient.run(options)
        #expect(result.ok, "\(result.error ?? "")")
        #expect(result.sameSocket == true, "four requests, one TLS connection")
        #expect(result.alpn == "http/1.1")
        #expect(result.peerSha256 == issued.sha256)
        #expect(result.responses?.map(\.status) == [200, 200, 200, 200])
        #expect(result.responses?.allSatisfy { $0.headers["x-request-id"] != nil } == true)
        let records = upstream.records
        #expect(records.map(\.target) == ["/public/a", "/public/b", "/public/c"])
        #expect(records.map { $0.header("X-Forwarded-Proto") } == ["https", "https", "https"],
                "an untrusted client cannot claim http")
        #expect(records[1].body == Array("payload".utf8))

        // Plain HTTP on the TLS port is not served.
        #expect(throws: (any Error).self) { try HTTPTestClient.send(port: gateway.port, "GET", "/healthz") }
        #expect(upstream.records.count == 3)
    }

    @Test func aTrustedProxyKeepsItsForwardedProto() throws {
        let (_, files) = try Self.certificate()
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["p.yaml": Self.proxyTenant(teamID: teamID, upstream: upstream)],
                                      gatewayYAML: Self.tlsServer(extra: "  trusted_proxies: [127.0.0.1/32]"), files: files)
        defer { gateway.stop() }
        let result = try TLSTestClient.run(.init(port: gateway.port, requests: [
            .init("GET", "/public/x", headers: ["X-Team-ID": teamID, "X-Bundle-ID": "com.example.app", "X-Forwarded-Proto": "http"]),
            .init("GET", "/public/y", headers: ["X-Team-ID": teamID, "X-Bundle-ID": "com.example.app"]),
        ]))
        #expect(result.responses?.map(\.status) == [200, 200])
        #expect(upstream.records.map { $0.header("X-Forwarded-Proto") } == ["http", "https"])
    }

    @Test func oldProtocolsAndH2OnlyAreRefusedAndCounted() throws {
        let (_, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        var tls11 = TLSTestClient.Options(port: gateway.port, requests: [.init("GET", "/healthz")])
        tls11.minVersion = "TLSv1_1"
        tls11.maxVersion = "TLSv1_1"
        tls11.ciphers = "DEFAULT:@SECLEVEL=0"
        let old = try TLSTestClient.run(tls11)
        #expect(!old.ok)
        #expect(old.error?.contains("protocol version") == true, "\(old.error ?? "")")
        var h2 = TLSTestClient.Options(port: gateway.port, requests: [.init("GET", "/healthz")])
        h2.alpn = ["h2"]
        let h2Only = try TLSTestClient.run(h2)
        #expect(!h2Only.ok)
        #expect(h2Only.error?.contains("no application protocol") == true, "\(h2Only.error ?? "")")
        var tls12 = TLSTestClient.Options(port: gateway.port, requests: [.init("GET", "/healthz")])
        tls12.maxVersion = "TLSv1_2"
        #expect(try TLSTestClient.run(tls12).responses?.first?.status == 200)

        let metrics = try gateway.admin("GET", "/metrics").text
        #expect(metrics.contains(#"attestgate_tls_handshake_failures_total{listener="public",reason="protocol_version"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"attestgate_tls_handshake_failures_total{listener="public",reason="alpn"} 1"#))
        #expect(metrics.contains(#"attestgate_tls_handshakes_total{listener="public",version="TLSv1.2"} 1"#))
    }

    @Test func theHandshakeDeadlineComesFromTheConfiguration() throws {
        let (_, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(handshake: "300ms"), files: files)
        defer { gateway.stop() }
        let silent = try RawTestSocket(port: gateway.port)
        let started = ContinuousClock.now
        let (_, closed) = silent.readUntilClose(timeout: .seconds(5))
        let elapsed = ContinuousClock.now - started
        #expect(closed)
        #expect(elapsed >= .milliseconds(250) && elapsed < .seconds(3), "\(elapsed)")
        #expect(eventually(5) {
            (try? gateway.admin("GET", "/metrics").text)?
                .contains(#"attestgate_tls_handshake_failures_total{listener="public",reason="timeout"} 1"#) == true
        })
    }

    @Test func aReloadRotatesTheCertificateWithoutDroppingOpenConnections() async throws {
        let (first, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        let paused = gateway.directory + "/paused"
        let resume = gateway.directory + "/resume"
        var options = TLSTestClient.Options(port: gateway.port, requests: [.init("GET", "/healthz"), .init("GET", "/readyz"),
                                                                           .init("GET", "/healthz")])
        options.pausedFile = paused
        options.resumeFile = resume
        let open = TLSTestClient.start(options)
        // A loaded machine can take a while to start the Python client: without its paused
        // connection the rest would test nothing, so it is required.
        try #require(eventually(90) { FileManager.default.fileExists(atPath: paused) })

        // Rotate: new key and certificate written over the same files, then the admin reload.
        let authority = try TestCertificateAuthority.generate(commonName: "attestgate Test TLS CA 2")
        let second = try authority.issueTLSServerCertificate(dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], validDays: 30)
        _ = try second.write(to: gateway.directory, name: "server")
        #expect(try gateway.admin("POST", "/admin/v1/reload").status == 200)
        let fresh = try TLSTestClient.run(.init(port: gateway.port, caFile: gateway.directory + "/server-ca.pem",
                                                serverHostname: "localhost", requests: [.init("GET", "/healthz")]))
        #expect(fresh.ok, "\(fresh.error ?? "")")
        #expect(fresh.peerSha256 == second.sha256, "new connections get the new certificate")

        _ = FileManager.default.createFile(atPath: resume, contents: nil)
        let before = try await open.value
        #expect(before.ok, "\(before.error ?? "")")
        #expect(before.peerSha256 == first.sha256)
        #expect(before.sameSocket == true)
        #expect(before.responses?.map(\.status) == [200, 200, 200], "the connection opened before the reload kept working")
        #expect(gateway.logText().components(separatedBy: "TLS certificate loaded").count == 3, "at startup and at the reload")
    }

    @Test func badCertificatesAndKeysAreRefusedAtLoadWithTheirLine() throws {
        let (_, files) = try Self.certificate()
        let (_, otherFiles) = try Self.certificate()
        let config = try TestConfigDirectory(tenants: [:], gatewayYAML: Self.tlsServer(),
                                             files: files.merging(["other-key.pem": otherFiles["server-key.pem"]!,
                                                                   "garbage.pem": "-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n"]) { $1 })
        let yaml = try TestFile.text(config.gatewayPath)
        let tlsLine = try #require(yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("tls:") }) + 1
        #expect(GatewaySnapshot.check(path: config.gatewayPath).isEmpty)

        try yaml.replacingOccurrences(of: "key: server-key.pem", with: "key: other-key.pem").write(toFile: config.gatewayPath, atomically: true, encoding: .utf8)
        let mismatched = GatewaySnapshot.check(path: config.gatewayPath)
        #expect(mismatched == ["\(config.gatewayPath):\(tlsLine): server.tls.key: private key \"\(config.directory)/other-key.pem\": the private key does not match the certificate"],
                "\(mismatched)")
        // A key of another type (RSA for an EC certificate) is told the same, not OpenSSL's
        // "no certificate assigned".
        try SigningKeyGenerator.generate(algorithm: .rs256, path: config.directory + "/rsa-key.pem")
        try yaml.replacingOccurrences(of: "key: server-key.pem", with: "key: rsa-key.pem").write(toFile: config.gatewayPath, atomically: true, encoding: .utf8)
        let otherType = GatewaySnapshot.check(path: config.gatewayPath)
        #expect(otherType == ["\(config.gatewayPath):\(tlsLine): server.tls.key: private key \"\(config.directory)/rsa-key.pem\": the private key does not match the certificate"],
                "\(otherType)")

        try yaml.replacingOccurrences(of: "cert: server.pem", with: "cert: garbage.pem").write(toFile: config.gatewayPath, atomically: true, encoding: .utf8)
        let garbage = GatewaySnapshot.check(path: config.gatewayPath)
        #expect(garbage.count == 1)
        #expect(garbage.first?.hasPrefix("\(config.gatewayPath):\(tlsLine): server.tls.cert: certificate chain \"\(config.directory)/garbage.pem\": not a PEM certificate chain") == true,
                "\(garbage)")

        // The executable's check-config says the same and fails.
        let binary = TestGateway.builtProductPath("attestgate")
        let checked = try runProgram(binary, ["check-config", config.gatewayPath], mergingErrors: true)
        #expect(checked.status == 1)
        #expect(String(decoding: checked.output, as: UTF8.self).contains("gateway.yaml:\(tlsLine): server.tls.cert: certificate chain"))
    }

    /// An encrypted key (PKCS#8 or a traditional EC key) is refused and said to be one — never
    /// a pass phrase asked on the terminal (stop 34, independent TLS sweep: OpenSSL's default
    /// callback prompted on a controlling terminal and blocked check-config, the start, or a
    /// reload's control thread, and SIGTERM behind it).
    @Test func anEncryptedKeyIsRefusedWithoutAPrompt() throws {
        let (_, files) = try Self.certificate()
        let config = try TestConfigDirectory(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        let yaml = try TestFile.text(config.gatewayPath)
        let tlsLine = try #require(yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("tls:") }) + 1
        let plain = config.directory + "/server-key.pem"
        for (name, command) in [("pkcs8-encrypted.pem", ["pkey", "-aes256"]), ("ec-encrypted.pem", ["ec", "-aes256"])] {
            let made = try runProgram("/usr/bin/openssl", command + ["-in", plain, "-passout", "pass:secret", "-out", config.directory + "/" + name],
                                      mergingErrors: true)
            #expect(made.status == 0, "\(String(decoding: made.output, as: UTF8.self))")
            try yaml.replacingOccurrences(of: "key: server-key.pem", with: "key: \(name)").write(toFile: config.gatewayPath, atomically: true, encoding: .utf8)
            #expect(GatewaySnapshot.check(path: config.gatewayPath) == [
                "\(config.gatewayPath):\(tlsLine): server.tls.key: private key \"\(config.directory)/\(name)\": an encrypted private key: pass phrases are not supported (decrypt it with openssl pkey)",
            ])
            // With a terminal (script(1) gives it one), check-config still answers at once.
            let checked = try runProgram("/usr/bin/timeout", ["20", "/usr/bin/script", "-qec",
                                                              "\(TestGateway.builtProductPath("attestgate")) check-config \(config.gatewayPath)", "/dev/null"],
                                         mergingErrors: true)
            let output = String(decoding: checked.output, as: UTF8.self)
            #expect(checked.status == 1 && output.contains("an encrypted private key") && !output.contains("pass phrase:"), "\(checked.status): \(output)")
        }
    }

    @Test func aReloadWithABadCertificateKeepsServingTheOldOne() throws {
        let (first, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        try "not a certificate\n".write(toFile: gateway.directory + "/server.pem", atomically: true, encoding: .utf8)
        let reload = try gateway.admin("POST", "/admin/v1/reload")
        #expect(reload.status == 400)
        #expect(reload.code == "config_invalid")
        #expect((reload.json["hint"] as? String)?.contains("gateway.yaml:") == true, "\(reload.text)")
        #expect((reload.json["hint"] as? String)?.contains("server.tls.cert") == true, "\(reload.text)")
        let result = try TLSTestClient.run(.init(port: gateway.port, requests: [.init("GET", "/healthz")]))
        #expect(result.ok)
        #expect(result.peerSha256 == first.sha256)
    }

    @Test func removingServerTLSInAReloadNeverTurnsThePortPlain() throws {
        let (first, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        let yaml = try TestFile.text(gateway.config.gatewayPath)
        // Without server.tls its handshake deadline is refused (it would have no effect).
        try yaml.replacingOccurrences(of: "  tls: { cert: server.pem, key: server-key.pem }\n", with: "")
            .write(toFile: gateway.config.gatewayPath, atomically: true, encoding: .utf8)
        let refused = try gateway.admin("POST", "/admin/v1/reload")
        #expect(refused.status == 400)
        #expect((refused.json["hint"] as? String)?.contains("server.timeouts.tls_handshake: applies only with server.tls") == true,
                "\(refused.text)")
        try yaml.replacingOccurrences(of: "  tls: { cert: server.pem, key: server-key.pem }\n", with: "")
            .replacingOccurrences(of: "  timeouts: { tls_handshake: 10s }\n", with: "")
            .write(toFile: gateway.config.gatewayPath, atomically: true, encoding: .utf8)
        #expect(try gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(gateway.logText().contains(#""msg":"setting changed on reload takes effect after a restart","key":"server.tls""#))
        let result = try TLSTestClient.run(.init(port: gateway.port, requests: [.init("GET", "/healthz")]))
        #expect(result.responses?.first?.status == 200)
        #expect(result.peerSha256 == first.sha256)
        #expect(throws: (any Error).self) { try HTTPTestClient.send(port: gateway.port, "GET", "/healthz") }
    }

    /// The handshake deadline is read when each worker's TLS listener is built: a reload that
    /// changes it names it as restart-only.
    @Test func aReloadChangingTheHandshakeDeadlineNamesItRestartOnly() throws {
        let (_, files) = try Self.certificate()
        let gateway = try TestGateway(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        defer { gateway.stop() }
        let yaml = try TestFile.text(gateway.config.gatewayPath)
        try yaml.replacingOccurrences(of: "tls_handshake: 10s", with: "tls_handshake: 3s")
            .write(toFile: gateway.config.gatewayPath, atomically: true, encoding: .utf8)
        #expect(try gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(gateway.logText().contains(#""msg":"setting changed on reload takes effect after a restart","key":"server.timeouts.tls_handshake""#))
    }

    @Test func theExecutableServesTLSAndRotatesOnSIGHUP() throws {
        let (first, files) = try Self.certificate()
        let config = try TestConfigDirectory(tenants: [:], gatewayYAML: Self.tlsServer(), files: files)
        let process = try GatewayProcess(configPath: config.gatewayPath)
        let before = try TLSTestClient.run(.init(port: process.port, caFile: config.directory + "/server-ca.pem",
                                                 serverHostname: "localhost", requests: [.init("GET", "/healthz")]))
        #expect(before.responses?.first?.status == 200)
        #expect(before.peerSha256 == first.sha256)

        let second = try TestCertificateAuthority.generate().issueTLSServerCertificate(dnsNames: ["localhost"])
        _ = try second.write(to: config.directory, name: "server")
        process.signal(SIGHUP)
        #expect(eventually(10) { process.log.contains(#""trigger":"SIGHUP""#) })
        let after = try TLSTestClient.run(.init(port: process.port, caFile: config.directory + "/server-ca.pem",
                                                serverHostname: "localhost", requests: [.init("GET", "/healthz")]))
        #expect(after.ok, "\(after.error ?? "")")
        #expect(after.peerSha256 == second.sha256)
        process.signal(SIGTERM)
        #expect(process.waitForExit() == 0)
    }
}
