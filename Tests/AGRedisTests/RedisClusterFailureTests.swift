import AGRedis
import AGTestSupport
import Foundation
import Testing

/// The client against private clusters whose topology the tests change: a slot migrated
/// (ASK while it moves, MOVED once it moved), a manual failover, a primary killed.
@Suite struct RedisClusterFailureTests {
    @Test func followsAskDuringMigrationMovedAfterItAndAManualFailover() async throws {
        let cluster = try await RedisCluster.start(nodeTimeout: 5000)
        try await ClientHarness.with(cluster.url) { redis in
            try await redis.waitUntil(.connected)
            let tag = "{mig\(UInt32.random(in: 0...UInt32.max))}"
            let slot = Int(HashSlot.slot(of: tag.dropFirst().dropLast().description))
            let source = try #require(try cluster.owner(of: slot))
            let target = try #require(try cluster.primaries().first { $0 != source })
            let sourceID = try #require(try cluster.id(of: source)), targetID = try #require(try cluster.id(of: target))
            #expect(try await redis.value(["SET", "old\(tag)", "v1"]) == .status("OK"))

            // The slot starts moving: a key the source does not hold is answered with ASK.
            try cluster.cli(target, "cluster", "setslot", String(slot), "importing", sourceID)
            try cluster.cli(source, "cluster", "setslot", String(slot), "migrating", targetID)
            let asksBefore = try redirects(on: source)
            #expect(try await redis.value(["SET", "new\(tag)", "v2"]) == .status("OK"))
            #expect(try await redis.value(["GET", "new\(tag)"]) == "v2")
            #expect(try await redis.value(["GET", "old\(tag)"]) == "v1")
            #expect(try redirects(on: source) == asksBefore + 2)
            #expect(try cluster.cli(target, "cluster", "countkeysinslot", String(slot)) == "1")
            // Keys split between the two nodes: a multi-key command gets TRYAGAIN until its
            // deadline, and the error says so (stop 36's cluster sweep: the log said "cluster not
            // reachable", and operators looked for a dead node during a resharding).
            // With the gateway's deadline (250 ms) the command is still parked when it passes;
            // with a longer one it runs out of retries and fails with the TRYAGAIN itself.
            try await ClientHarness.with(cluster.url, timeout: .milliseconds(250)) { short in
                try await short.waitUntil(.connected)
                let split = await short.send(["MGET", "old\(tag)", "new\(tag)"])
                guard case .failure(.unavailable(let reason)) = split else {
                    Issue.record("a multi-key command across a migrating slot's two nodes: \(split)")
                    return
                }
                #expect(reason.hasPrefix("not served within the deadline: the cluster kept answering TRYAGAIN"), "\(reason)")
            }

            // The move completes: the next command meets MOVED once, then the map knows.
            try cluster.cli(source, "migrate", "127.0.0.1", String(target), "", "0", "5000", "keys", "old\(tag)")
            for port in try cluster.primaries() {
                try cluster.cli(port, "cluster", "setslot", String(slot), "node", targetID)
            }
            let movedBefore = try redirects(on: source)
            #expect(try await redis.value(["GET", "old\(tag)"]) == "v1")
            #expect(try redirects(on: source) == movedBefore + 1)
            for _ in 0..<3 { #expect(try await redis.value(["GET", "new\(tag)"]) == "v2") }
            #expect(try redirects(on: source) == movedBefore + 1)

            // A manual failover of the slot's new owner: its replica takes over, MOVED leads there.
            let replica = try #require(try cluster.replica(of: target))
            try cluster.cli(replica, "cluster", "failover")
            try await waitUntil(within: .seconds(20), "replica promoted") {
                try cluster.cli(replica, "role").hasPrefix("master") && cluster.cli(target, "role").hasPrefix("slave")
            }
            try await waitUntil(within: .seconds(20), "client follows the failover") {
                (try? await redis.send(["SET", "new\(tag)", "v3"]).get()) == .status("OK")
            }
            #expect(try cluster.cli(replica, "get", "new\(tag)") == "v3")
        }
    }

    @Test func killedPrimaryIsReplacedAndTheClientFollowsWithinDeadlines() async throws {
        let cluster = try await RedisCluster.start(nodeTimeout: 1000)
        let timeout = Duration.milliseconds(400)
        try await ClientHarness.with(cluster.url, timeout: timeout) { redis in
            try await redis.waitUntil(.connected)
            let key = uniqueKey("failover")
            let victim = try #require(try cluster.owner(of: Int(HashSlot.slot(of: key))))
            let replica = try #require(try cluster.replica(of: victim))
            #expect(try await redis.value(["SET", key, "0"]) == .status("OK"))
            // Another primary's keys are not affected by the failover.
            let bystander = try #require((0..<100).map { uniqueKey("other\($0)") }
                .first { try! cluster.owner(of: Int(HashSlot.slot(of: $0))) != victim })
            cluster.kill(victim)

            var failures = 0
            var slowest = Duration.zero
            let recovered = await poll(within: .seconds(30), every: .milliseconds(20)) {
                let (result, elapsed) = await redis.timedSend(["INCR", key])
                slowest = max(slowest, elapsed)
                #expect((try? await redis.send(["SET", bystander, "x"]).get()) == .status("OK"))
                switch result {
                case .success: return failures > 0
                case .failure: failures += 1; return false
                }
            }
            #expect(recovered, "the client never reached the promoted replica")
            #expect(failures > 0, "the killed primary's slots failed while the replica was promoted")
            // Never a stall: a command waiting for the failover gives up at its deadline (the
            // slack is scheduling on the loaded machine; under a sanitizer it is 4 × 300 ms).
            #expect(slowest < timeout + TestBuild.waitWindow(.milliseconds(300)))
            #expect(try cluster.cli(replica, "role").hasPrefix("master"))
            try await redis.waitUntil(.connected)
            #expect(redis.states.all.contains(.disconnected))
        }
    }
}
