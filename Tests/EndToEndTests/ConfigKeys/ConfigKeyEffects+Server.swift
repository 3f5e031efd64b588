import AGTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `server.*` and `admin.*`: listeners, limits, timeouts, proxies.
extension ConfigKeyEffects {
    static let server: [KeyEffect] = [
        KeyEffect(key: "gateway:server.listen", observed: "the public port is the configured one and answers") {
            let port = try freePort()
            let probe = try KeyProbe(gatewayYAML: "server:\n  listen: \"127.0.0.1:\(port)\"\n  workers: 1\n")
            #expect(probe.gateway.port == port)
            #expect(try HTTPTestClient.send(port: port, "GET", "/healthz").status == 200)
        },
        KeyEffect(key: "gateway:server.workers", observed: "the real binary runs two more threads with 3 workers than with 1") {
            func threads(workers: Int) throws -> Int {
                let (probe, process) = try ConfigKeyEffects.process(gateway: KeyProbe.server("").replacingOccurrences(
                    of: "workers: 1", with: "workers: \(workers)"))
                defer { withExtendedLifetime(probe) {} }
                #expect(try HTTPTestClient.send(port: process.port, "GET", "/healthz").status == 200)
                return try FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/task").count
            }
            let three = try threads(workers: 3), one = try threads(workers: 1)
            #expect(three - one == 2, "\(three) threads with 3 workers, \(one) with 1")
        },
        KeyEffect(key: "gateway:server.max_connections",
                  observed: "with 2, accepting pauses (logged) and a third connection is served once one of the two closes; the admin port is not capped") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  max_connections: 2\n"))
            var first: HTTPTestClient? = try HTTPTestClient(port: probe.gateway.port)
            let second = try HTTPTestClient(port: probe.gateway.port)
            #expect(try first?.request("GET", "/healthz").status == 200)
            #expect(try second.request("GET", "/healthz").status == 200)
            #expect(eventually(5) { probe.logLines("accepting paused: connection limit reached").count == 1 })
            let third = try HTTPTestClient(port: probe.gateway.port)
            try third.write("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try probe.gateway.admin("GET", "/admin/v1/tiers").status == 200)
            first = nil
            #expect(try third.readResponse().status == 200, "served once a connection closed")
        },
        KeyEffect(key: "gateway:server.max_body_bytes", observed: "a refresh body over 1KiB is refused 400") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  max_body_bytes: 1KiB\n"))
            let response = try probe.gateway.send("POST", "/api/v1/attestation/refresh", headers: probe.headers,
                                                  body: Array(repeating: UInt8(ascii: " "), count: 2048) + Array("{}".utf8))
            #expect(response.status == 400)
            #expect(response.code == "bad_request")
            #expect(response.text.contains("1024"))
        },
        KeyEffect(key: "gateway:server.max_proxy_body_bytes", observed: "a proxied body over 1KiB is refused 413") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  max_proxy_body_bytes: 1KiB\n"))
            let response = try probe.proxied("/public/x", token: nil, method: "POST", body: Array(repeating: 1, count: 4096))
            #expect(response.status == 413)
            #expect(response.code == "payload_too_large")
            #expect(try probe.proxied("/public/x", token: nil, method: "POST", body: Array(repeating: 1, count: 512)).status == 200)
        },
        KeyEffect(key: "gateway:server.timeouts.read", observed: "a half-sent head is cut off after 300ms") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { read: 300ms }\n"))
            let socket = try RawTestSocket(port: probe.gateway.port)
            socket.send("GET /healthz HTTP/1.1\r\nHost: a\r\n")
            #expect(socket.readUntilClose(timeout: .seconds(3)).closed)
        },
        KeyEffect(key: "gateway:server.timeouts.write", observed: "a client that never reads a large answer is cut off") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { write: 300ms }\n"))
            let big = [UInt8](repeating: 0x61, count: 64 << 20)
            probe.upstream.reply { _ in UpstreamReply(body: big) }
            let client = try HTTPTestClient(port: probe.gateway.port)
            try client.write("GET /public/big HTTP/1.1\r\nHost: a\r\nX-Team-ID: \(probe.teamID)\r\nX-Bundle-ID: \(probe.bundleID)\r\n\r\n")
            #expect(eventually(10) { probe.upstream.records.count == 1 })
            // Socket buffers fill within milliseconds; then no progress for 300ms closes the
            // connection, and the 64 MiB answer can no longer be read in full.
            usleep(1_500_000)
            #expect(throws: (any Error).self) { try client.readResponse() }
        },
        KeyEffect(key: "gateway:server.timeouts.idle", observed: "an idle keep-alive connection is closed after 300ms") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { idle: 300ms }\n"))
            let socket = try RawTestSocket(port: probe.gateway.port)
            socket.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
            let (answer, closed) = socket.readUntilClose(timeout: .seconds(3))
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            #expect(closed, "the kept-alive connection is closed once idle")
        },
        KeyEffect(key: "gateway:server.timeouts.upstream_connect", observed: "an unreachable upstream fails in ~200ms, not 2s") {
            let blackhole = try BlackholePort()
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { upstream_connect: 200ms }\n"),
                                     tenantExtra: "")
            try probe.gateway.writeTenant("t.yaml", KeyProbe.tenant(teamID: probe.teamID, bundleID: probe.bundleID,
                                                                  upstreamPort: blackhole.port, tier: "test", extra: ""))
            probe.gateway.gateway.reload()
            var response: TestResponse?
            let elapsed = try seconds { response = try probe.proxied("/public/x", token: nil) }
            #expect(response?.status == 504)
            #expect(response?.code == "upstream_timeout")
            #expect(elapsed < 1.5, "took \(elapsed)s")
        },
        KeyEffect(key: "gateway:server.timeouts.upstream_response", observed: "a silent upstream answers 504 after ~200ms") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  timeouts: { upstream_response: 200ms }\n"))
            probe.upstream.reply { _ in UpstreamReply(delay: 5) }
            var response: TestResponse?
            let elapsed = try seconds { response = try probe.proxied("/public/slow", token: nil) }
            #expect(response?.status == 504)
            #expect(response?.code == "upstream_timeout")
            #expect(elapsed < 1.5, "took \(elapsed)s")
        },
        KeyEffect(key: "gateway:proxy.upstream_keepalive",
                  observed: "0: three proxied requests open three upstream connections; reloaded to 4, the next three share one") {
            let probe = try KeyProbe(gatewayYAML: "proxy:\n  upstream_keepalive: 0\n")
            for index in 0..<3 { #expect(try probe.proxied("/public/k\(index)", token: nil).status == 200) }
            #expect(probe.upstream.connectionCount == 3)
            let path = probe.gateway.config.gatewayPath
            try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "upstream_keepalive: 0", with: "upstream_keepalive: 4")
                .write(toFile: path, atomically: true, encoding: .utf8)
            probe.gateway.gateway.reload()
            for index in 0..<3 { #expect(try probe.proxied("/public/r\(index)", token: nil).status == 200) }
            #expect(probe.upstream.connectionCount == 4)
        },
        KeyEffect(key: "gateway:server.shutdown_grace", observed: "shutdown with a request in flight waits 300ms, not 10s") {
            let probe = try KeyProbe(gatewayYAML: "server:\n  listen: \"127.0.0.1:0\"\n  workers: 1\n  shutdown_grace: 300ms\n")
            probe.upstream.reply { _ in UpstreamReply(delay: 8) }
            let port = probe.gateway.port, headers = probe.headers
            Thread.detachNewThread { _ = try? HTTPTestClient.send(port: port, "GET", "/public/slow", headers: headers) }
            #expect(eventually(5) { probe.upstream.records.count == 1 })
            let elapsed = seconds { probe.gateway.stop() }
            #expect(elapsed >= 0.25 && elapsed < 3, "took \(elapsed)s")
        },
        KeyEffect(key: "gateway:server.trusted_proxies", observed: "X-Forwarded-For from a trusted peer picks the per-IP bucket") {
            let probe = try KeyProbe(gatewayYAML: KeyProbe.server("  trusted_proxies: [127.0.0.1/32]\n"))
            #expect(try probe.challenge(extraHeaders: [("X-Forwarded-For", "203.0.113.77")]).status == 200)
            #expect(try RedisCLI.run(probe.gateway.redisURL, "EXISTS", "ag:ip:{203.0.113.77}:rl:challenge") == "1")
            // A proxy that writes the port: its entry, not the client's own one to the left.
            #expect(try probe.challenge(extraHeaders: [("X-Forwarded-For", "198.51.100.79, 203.0.113.79:8080")]).status == 200)
            #expect(try RedisCLI.run(probe.gateway.redisURL, "EXISTS", "ag:ip:{203.0.113.79}:rl:challenge") == "1")
            #expect(try RedisCLI.run(probe.gateway.redisURL, "EXISTS", "ag:ip:{198.51.100.79}:rl:challenge") == "0")
            let untrusted = try KeyProbe()
            #expect(try untrusted.challenge(extraHeaders: [("X-Forwarded-For", "203.0.113.78")]).status == 200)
            #expect(try RedisCLI.run(untrusted.gateway.redisURL, "EXISTS", "ag:ip:{203.0.113.78}:rl:challenge") == "0")
        },
        KeyEffect(key: "gateway:server.tls.cert", observed: "a TLS client is shown that certificate (its SHA-256) and served") {
            let (issued, files) = try TLSListenerEndToEndTests.certificate()
            let gateway = try TestGateway(tenants: [:], gatewayYAML: TLSListenerEndToEndTests.tlsServer(), files: files)
            defer { gateway.stop() }
            let result = try TLSTestClient.run(TLSTestClient.Options(port: gateway.port, caFile: gateway.directory + "/server-ca.pem",
                                                                     serverHostname: "localhost", requests: [.init("GET", "/healthz")]))
            #expect(result.peerSha256 == issued.sha256)
            #expect(result.responses?.first?.status == 200)
        },
        KeyEffect(key: "gateway:server.timeouts.tls_handshake", observed: "TLSListenerEndToEndTests: a silent client is closed after 300ms") {
            try TLSListenerEndToEndTests().theHandshakeDeadlineComesFromTheConfiguration()
        },
        KeyEffect(key: "gateway:server.tls.key", observed: "TLSListenerEndToEndTests: a key of another certificate is refused with its line") {
            try TLSListenerEndToEndTests().badCertificatesAndKeysAreRefusedAtLoadWithTheirLine()
        },
        KeyEffect(key: "gateway:admin.listen", observed: "the admin port is the configured one and answers") {
            let port = try freePort()
            let probe = try KeyProbe(gatewayYAML: "admin:\n  listen: \"127.0.0.1:\(port)\"\n  token_file: admin-token\n")
            #expect(probe.gateway.adminPort == port)
            #expect(try probe.gateway.admin("GET", "/admin/v1/tiers").status == 200)
        },
        KeyEffect(key: "gateway:admin.token_file", observed: "the file's token opens the admin API, another is 401") {
            let probe = try KeyProbe(gatewayYAML: "admin:\n  listen: \"127.0.0.1:0\"\n  token_file: other-token\n",
                                     files: ["other-token": "file-token-123\n"])
            let ok = try HTTPTestClient.send(port: probe.gateway.adminPort, "GET", "/admin/v1/tiers", headers: [("Authorization", "Bearer file-token-123")])
            #expect(ok.status == 200)
            let refused = try probe.gateway.admin("GET", "/admin/v1/tiers")
            #expect(refused.status == 401)
            #expect(refused.code == "unauthorized")
        },
        KeyEffect(key: "gateway:admin.token_env", observed: "the variable's token, without the newline around it, opens the admin API") {
            let name = "AG_TEST_ADMIN_TOKEN_\(UInt32.random(in: 0...UInt32.max))"
            // As a Kubernetes secret made from a file gives it: with its newline, which is not
            // part of the token (every admin call was 401 until stop 32: an independent sweep).
            setenv(name, "env-token-456\n", 1)
            defer { unsetenv(name) }
            let probe = try KeyProbe(gatewayYAML: "admin:\n  listen: \"127.0.0.1:0\"\n  token_env: \(name)\n")
            let ok = try HTTPTestClient.send(port: probe.gateway.adminPort, "GET", "/admin/v1/tiers", headers: [("Authorization", "Bearer env-token-456")])
            #expect(ok.status == 200)
        },
    ]
}
