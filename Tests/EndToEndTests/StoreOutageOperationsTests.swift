import AGCrypto
import AGDevice
import AGFormats
import AGHTTP
import AGTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// Issue 9 item 8, operations under failure: repeated warnings rate-limited with counts, a
/// Redis that came back empty noticed (epoch) and reported in `/readyz`, the log and metrics,
/// and the stall semantics the README documents. Each test owns its Redis.
@Suite("store outages, as an operator sees them")
struct StoreOutageOperationsTests {
    let teamID = TestGateway.randomTeamID()
    var headers: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")] }

    func lines(_ gateway: TestGateway, containing text: String) -> [[String: Any]] {
        gateway.logText().split(separator: "\n").filter { $0.contains(text) }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test func anOutageWritesOneStoreFailureLinePerIntervalWithACount() async throws {
        try await RedisServer.withPrivate { redis in
            let time = ManualTime()
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], time: time)
            defer { gateway.stop() }
            #expect(try eventually { try gateway.send("GET", "/readyz").status == 200 })
            redis.kill()
            for _ in 0..<40 {
                let response = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
                #expect(response.status == 503)
                #expect(response.code == "store_unavailable")
            }
            #expect(lines(gateway, containing: "\"state store failed\"").count == 1, "\(gateway.logText())")
            time.advance(.seconds(10))
            let after = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
            #expect(after.status == 503)
            #expect(after.code == "store_unavailable")
            let written = lines(gateway, containing: "\"state store failed\"")
            #expect(written.count == 2)
            #expect(written.last?["suppressed"] as? Int == 39)
            #expect(written.last?["route"] as? String == "challenge")
            // Every failure is still counted where operators alert on it.
            let metrics = try gateway.admin("GET", "/metrics").text
            #expect(metrics.contains("attestgate_redis_errors_total 41"), "\(metrics)")
        }
    }

    @Test func aRedisThatComesBackEmptyIsNoticedReportedAndAcknowledged() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
            defer { gateway.stop() }
            let url = "redis://127.0.0.1:\(redis.port)/0"
            #expect(try eventually { try !RedisCLI.run(url, "GET", "ag:epoch").isEmpty }, "the first instance writes the epoch")
            let ready = try gateway.send("GET", "/readyz")
            #expect(ready.status == 200)
            #expect(ready.json["warnings"] == nil)
            #expect(!lines(gateway, containing: "redis held no store epoch").isEmpty, "a fresh Redis is worth a line")

            // The private server keeps nothing on disk: a restart brings it back empty.
            redis.kill()
            try await redis.restart()
            #expect(try eventually(10) { try gateway.send("GET", "/readyz").json["warnings"] != nil }, "noticed on reconnect")
            let warned = try gateway.send("GET", "/readyz")
            #expect(warned.status == 200, "lost data is not an outage: instances stay in rotation")
            let warning = try #require((warned.json["warnings"] as? [[String: Any]])?.first)
            #expect(warning["code"] as? String == "store_reset")
            #expect(warning["count"] as? Int == 1)
            #expect((warning["lastNoticedAt"] as? String)?.hasSuffix("Z") == true)
            let logged = lines(gateway, containing: "redis came back empty")
            #expect(logged.count == 1)
            #expect(logged.first?["level"] as? String == "error")
            #expect((logged.first?["lost"] as? String)?.contains("device records") == true)
            #expect(try gateway.admin("GET", "/metrics").text.contains("attestgate_store_resets_total 1"))

            let acknowledged = try gateway.admin("POST", "/admin/v1/store/acknowledge-reset")
            #expect(acknowledged.status == 200)
            #expect(acknowledged.json["acknowledged"] as? Int == 1)
            #expect(try gateway.send("GET", "/readyz").json["warnings"] == nil)
            #expect(try gateway.admin("POST", "/admin/v1/store/acknowledge-reset").json["acknowledged"] as? Int == 0)
            let unauthorized = try HTTPTestClient.send(port: gateway.adminPort, "POST", "/admin/v1/store/acknowledge-reset")
            #expect(unauthorized.status == 401)
            #expect(unauthorized.code == "unauthorized")
        }
    }

    @Test func aRedisWithAppendOnlyKeepsDevicesAndItsEpochAcrossARestart() async throws {
        // The Redis scripts/run starts for a development gateway (scripts/lib.sh, persistent).
        let directory = NSTemporaryDirectory() + "agredis-aof-" + UUID().uuidString.prefix(8)
        let port = try #require(Int(try shell("source scripts/lib.sh; free_port").trimmingCharacters(in: .whitespacesAndNewlines)))
        let start = "source scripts/lib.sh; start_redis \(port) \(directory) persistent"
        _ = try shell(start)
        defer {
            _ = try? shell("source scripts/lib.sh; stop_redis \(directory)")
            try? FileManager.default.removeItem(atPath: directory)
        }
        #expect(try RedisCLI.run("redis://127.0.0.1:\(port)/0", "CONFIG", "GET", "appendonly").contains("yes"))
        let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(port)/0",
                                      tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        let device = DeviceSession(configuration: configuration, device: try SimulatedDevice(teamID: teamID, bundleID: "com.example.app"))
        try device.register()
        try device.refresh()
        #expect(try eventually { try !RedisCLI.run("redis://127.0.0.1:\(port)/0", "GET", "ag:epoch").isEmpty })

        _ = try shell("source scripts/lib.sh; stop_redis \(directory)")
        #expect(try eventually { try gateway.send("GET", "/readyz").status == 503 })
        _ = try shell(start)
        #expect(try eventually(10) { try gateway.send("GET", "/readyz").status == 200 })
        // The reconnect was checked against the epoch: unchanged, so no warning.
        #expect(eventually(10) { !lines(gateway, containing: "store epoch unchanged after reconnect").isEmpty })
        #expect(try gateway.send("GET", "/readyz").json["warnings"] == nil)
        #expect(lines(gateway, containing: "redis came back empty").isEmpty)
        let token = try device.refresh()
        #expect(!token.token.isEmpty, "the device survived the restart")
    }

    @Test func aRefreshAnswered503DuringAStallMayStillSpendItsChallenge() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], redisTimeout: "200ms")
            defer { gateway.stop() }
            let appID = "\(teamID).com.example.app"
            var device = try SimulatedDevice(teamID: teamID, bundleID: "com.example.app")
            #expect(try gateway.importKey(appID: appID, keyID: device.keyID, publicKey: Base64.encode(device.publicKeyX963),
                                          counter: 0).status == 200)
            let challenge = try #require(try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).json["challenge"] as? String)
            let (assertion, hash) = try device.makeAssertion(challenge: challenge)
            let body = try JSONSerialization.data(withJSONObject: [
                "keyId": device.keyID, "assertion": Base64.encode(assertion), "clientDataHash": Base64.encode(hash), "challenge": challenge,
            ])
            // Warm the script cache as traffic would (an unknown challenge runs the prepare
            // script): a script Redis has not cached yet would fail NOSCRIPT on wake-up instead.
            let warm = try JSONSerialization.data(withJSONObject: [
                "keyId": device.keyID, "assertion": Base64.encode(assertion), "clientDataHash": Base64.encode(SHA256.hash("x".utf8)),
                "challenge": "x",
            ])
            let unknown = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers + [("Content-Type", "application/json")],
                                           body: Array(warm))
            #expect(unknown.status == 400)
            #expect(unknown.code == "challenge_invalid")
            redis.pause()
            let stalled = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers + [("Content-Type", "application/json")],
                                           body: Array(body))
            #expect(stalled.status == 503)
            #expect(stalled.code == "store_unavailable")
            redis.resume()
            // The script was already on its way: Redis runs it when it wakes up.
            #expect(try eventually(5) { try gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:") })
        }
    }

    /// Runs `script` with bash in the package directory; throws on a non-zero exit. Spawned and
    /// reaped by hand, output through a file: a daemon the script starts inherits the test
    /// process's descriptors, and Foundation's `Process` waits for those to close.
    func shell(_ script: String) throws -> String {
        let root = URL(fileURLWithPath: TestGateway.fixturePath("x")).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let outputPath = NSTemporaryDirectory() + "agshell-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let words: [String] = ["/bin/bash", "-c", "cd \(root) && \(script)"]
        let argv = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // Test threads block signals and a child inherits that mask; the Redis it starts must see SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/bash", &actions, &attributes, argv, environ) == 0 else {
            throw RedisServerError.couldNotStart("cannot spawn bash")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0 else { throw RedisServerError.couldNotStart(text) }
        return text
    }
}
