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

    /// Runs `script` with bash in the package directory (`runProgram`: spawned and reaped by
    /// hand, so a daemon the script starts neither holds a pipe open nor inherits blocked
    /// signals); throws on a non-zero exit.
    func shell(_ script: String) throws -> String {
        let root = URL(fileURLWithPath: TestGateway.fixturePath("x")).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let (status, output) = try runProgram("/bin/bash", ["-c", "cd \(root) && \(script)"], mergingErrors: true)
        let text = String(decoding: output, as: UTF8.self)
        guard status == 0 else { throw RedisServerError.couldNotStart(text) }
        return text
    }
}
