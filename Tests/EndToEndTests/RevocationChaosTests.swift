import AGPolicy
import AGTestSupport
import Foundation
import AGSync
import Testing

/// Issue 9 item 2, end to end: three instances, devices revoked one after another while their
/// Redis connections are killed and the server is frozen past every deadline, again and again.
/// Not one revoked token may reach the upstream once the promised bound has passed (one lease
/// lifetime, 1 s, on the instances' shared controlled clock); nor one whose record is gone, nor
/// one that cannot be checked while Redis is down.
@Suite(.serialized, .onOwnThreads) struct RevocationChaosTests {
    @Test func noRevokedTokenIsProxiedThroughKillsAndFreezesOnThreeInstances() throws {
        let server = try blockingStart()
        let url = "redis://127.0.0.1:\(server.port)/0"
        // Revocations are seen by every worker within one lease lifetime: the test moves this
        // clock past it after each one, instead of hoping the events stream outran the chaos.
        let time = ManualTime()
        let bound = Duration.microseconds(LeaseSizing.lifetimeMicroseconds) + .milliseconds(100)
        let first = try ProxyFixture(redisURL: url, time: time)
        defer { first.stop() }
        var instances = [first]
        for _ in 0..<2 {
            let other = try ProxyFixture(teamID: first.teamID, redisURL: url, upstream: first.upstream, time: time)
            try FileManager.default.removeItem(atPath: other.gateway.directory + "/keys/test-es256.pem")
            try FileManager.default.copyItem(atPath: first.gateway.directory + "/keys/test-es256.pem",
                                             toPath: other.gateway.directory + "/keys/test-es256.pem")
            #expect(try other.gateway.admin("POST", "/admin/v1/reload").status == 200)
            instances.append(other)
        }
        defer { for instance in instances.dropFirst() { instance.gateway.stop() } }

        // Warm every worker's token cache and the devices' records.
        var tokens: [(keyID: String, token: String)] = []
        for _ in 0..<24 {
            let claims = first.claims()
            tokens.append((claims["sub"]!.stringValue!, try first.sign(claims)))
        }
        for (_, token) in tokens {
            for instance in instances {
                let response = try instance.get("/api/warm", token: token)
                #expect(response.status == 200, "warm-up answered \(response.status): \(response.text)")
            }
        }
        let warmed = first.upstream.records.count

        // Chaos on its own thread: kill the gateways' connections, freeze the server for longer
        // than any read deadline (250 ms command timeout), repeatedly.
        let chaos = Chaos(port: server.port)
        chaos.start()
        var outcomes: [Int: Int] = [:]
        for (index, entry) in tokens.enumerated() {
            // Spread the revocations over a few chaos rounds.
            usleep(60_000)
            let admin = instances[index % 3]
            let path = "/admin/v1/tenants/\(first.appID)/keys/\(pathKeyID(entry.keyID))/revoke"
            var revoked = false
            // The admin call itself may meet a killed connection or a frozen server: retry.
            let deadline = Date().addingTimeInterval(10)
            while !revoked, Date() < deadline {
                revoked = (try? admin.gateway.admin("POST", path))?.status == 200
                if !revoked { usleep(20_000) }
            }
            #expect(revoked, "revocation \(index) never went through")
            time.advance(bound)
            for instance in instances {
                for _ in 0..<2 {
                    let status = (try? instance.get("/api/after", token: entry.token))?.status ?? 0
                    outcomes[status, default: 0] += 1
                }
            }
        }
        chaos.stop()
        let proxiedAfter = first.upstream.records.dropFirst(warmed).filter { $0.target.hasSuffix("/api/after") }
        #expect(proxiedAfter.isEmpty, "revoked tokens proxied: \(proxiedAfter.count); outcomes \(outcomes)")
        #expect(outcomes[200] == nil)
        #expect((outcomes[403] ?? 0) > 0, "outcomes \(outcomes)")
        #expect(chaos.kills > 0 && chaos.freezes > 0)

        // A token whose record is gone (Redis restarted empty) is refused like a revoked one.
        let survivor = first.claims()
        let survivorToken = try first.sign(survivor)
        #expect(try first.get("/api/ok", token: survivorToken).status == 200)
        try RedisCLI.run(url, "FLUSHALL")
        time.advance(bound)
        for instance in instances {
            let refused = try instance.get("/api/gone", token: survivorToken)
            #expect(refused.status == 403)
            #expect(refused.code == "forbidden")
        }
        // And one that cannot be checked because Redis is down is refused (deny by default).
        server.stop()
        time.advance(bound)
        for instance in instances {
            let down = try instance.get("/api/down", token: survivorToken)
            #expect(down.status == 503)
            #expect(down.code == "store_unavailable")
        }
        #expect(!first.upstream.records.contains { $0.target.hasSuffix("/api/gone") || $0.target.hasSuffix("/api/down") })
        #expect(!first.gateway.logText().contains(survivorToken.prefix(40)))
    }

    private func pathKeyID(_ keyID: String) -> String {
        keyID.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    private func blockingStart() throws -> RedisServer {
        let box = Locked<Result<RedisServer, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let result: Result<RedisServer, any Error>
            do { result = .success(try await RedisServer.start()) } catch { result = .failure(error) }
            box.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try box.withLock { $0! }.get()
    }
}

/// Kills every client connection but its own and freezes the server (`CLIENT PAUSE … ALL`,
/// 400 ms: longer than the gateways' 250 ms command timeout) in turns, on a thread of its own.
private final class Chaos: @unchecked Sendable {
    // Invariant: `state` is the only shared mutable state, guarded by its mutex.
    private let port: Int
    private let state = Locked((running: false, kills: 0, freezes: 0))
    private let finished = DispatchSemaphore(value: 0)

    init(port: Int) { self.port = port }

    var kills: Int { state.withLock { $0.kills } }
    var freezes: Int { state.withLock { $0.freezes } }

    func start() {
        state.withLock { $0.running = true }
        Thread { [self] in
            var round = 0
            while state.withLock({ $0.running }) {
                round += 1
                let url = "redis://127.0.0.1:\(port)/0"
                if round % 3 == 0 {
                    if (try? RedisCLI.run(url, "CLIENT", "PAUSE", "400", "ALL")) == "OK" { state.withLock { $0.freezes += 1 } }
                    usleep(450_000)
                } else {
                    // Every normal client: the gateways' command connections and stream readers.
                    if let killed = try? RedisCLI.run(url, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"), let count = Int(killed) {
                        state.withLock { $0.kills += count }
                    }
                    usleep(150_000)
                }
            }
            finished.signal()
        }.start()
    }

    func stop() {
        state.withLock { $0.running = false }
        finished.wait()
    }
}
