import AGRedis
import AGTestSupport
import Foundation
import Testing

/// The store epoch on a Redis Cluster: one per shard, so a shard that loses its data alone is
/// noticed, while a failover, a resharding or a new instance raise no false alarm. Each test
/// owns its cluster (it flushes, kills or reshards a node).
@Suite(.serialized, .onOwnThreads) struct ClusterStoreEpochTests {
    let teamID = TestGateway.randomTeamID()

    func gateway(_ cluster: RedisCluster) throws -> TestGateway {
        try TestGateway(redisURL: cluster.url.description, tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)],
                        redisTimeout: GatewayTopologyTests.redisTimeout)
    }

    /// Log lines of `gateway` whose message contains `text`.
    func lines(_ gateway: TestGateway, containing text: String) -> [[String: Any]] {
        gateway.logText().split(separator: "\n").filter { $0.contains(text) }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The shard fields of `gateway`'s lines containing `text`.
    func shards(_ gateway: TestGateway, _ text: String) -> [String] {
        lines(gateway, containing: text).compactMap { $0["shard"] as? String }
    }

    /// True once every primary of `cluster` holds a store epoch key.
    func everyShardHoldsAnEpoch(_ cluster: RedisCluster) throws -> Bool {
        try cluster.primaries().allSatisfy { try !cluster.cli($0, "keys", "ag:epoch:*").isEmpty }
    }

    @Test func aShardThatLosesItsDataAloneIsNoticedByEveryInstanceAndNamed() async throws {
        let cluster = try await RedisCluster.start(nodeTimeout: 5000)
        let first = try gateway(cluster)
        defer { first.stop() }
        #expect(try eventually(10) { try everyShardHoldsAnEpoch(cluster) }, "the first instance writes one epoch per shard")
        let primaries = try cluster.primaries()
        #expect(eventually { Set(shards(first, "redis held no store epoch")) == Set(primaries.map { "127.0.0.1:\($0)" }) },
                "a fresh shard is worth a line each: \(first.logText())")

        // A second instance starting against the epochs reads them and says nothing.
        let second = try gateway(cluster)
        defer { second.stop() }
        #expect(eventually { Set(shards(second, "store epoch read")) == Set(primaries.map { "127.0.0.1:\($0)" }) },
                "\(second.logText())")

        // The shard that held the single epoch key (`ag:epoch`) before is left alone: one of
        // the others loses its data, and with it its replica's.
        let singleKeyShard = try cluster.owner(of: Int(HashSlot.slot(of: "ag:epoch")))
        let victim = try #require(primaries.first { $0 != singleKeyShard })
        try cluster.cli(victim, "flushall")
        for instance in [first, second] {
            #expect(try eventually(15) { try instance.send("GET", "/readyz").json["warnings"] != nil },
                    "noticed within a check: \(instance.logText())")
            let warned = try instance.send("GET", "/readyz")
            #expect(warned.status == 200)
            let warning = try #require((warned.json["warnings"] as? [[String: Any]])?.first)
            #expect(warning["code"] as? String == "store_reset")
            #expect(warning["count"] as? Int == 1)
            let logged = lines(instance, containing: "redis came back empty")
            #expect(logged.count == 1, "\(instance.logText())")
            #expect(logged.first?["level"] as? String == "error")
            #expect(logged.first?["shard"] as? String == "127.0.0.1:\(victim)", "the line names the shard")
            #expect((logged.first?["key"] as? String)?.hasPrefix("ag:epoch:{") == true)
            #expect(try instance.admin("GET", "/metrics").text.contains("attestgate_store_resets_total 1"))
        }
        #expect(lines(second, containing: "redis held no store epoch").isEmpty, "\(second.logText())")
        #expect(try everyShardHoldsAnEpoch(cluster), "the emptied shard has a new epoch")

        // Acknowledged per instance, as on one Redis.
        #expect(try first.admin("POST", "/admin/v1/store/acknowledge-reset").json["acknowledged"] as? Int == 1)
        #expect(try first.send("GET", "/readyz").json["warnings"] == nil)
        #expect(try second.send("GET", "/readyz").json["warnings"] != nil)
    }

    @Test func aFailoverKeepsTheShardsEpochAndRaisesNoAlarm() async throws {
        let cluster = try await RedisCluster.start(nodeTimeout: 1000)
        let gateway = try gateway(cluster)
        defer { gateway.stop() }
        #expect(try eventually(10) { try everyShardHoldsAnEpoch(cluster) })
        #expect(eventually { shards(gateway, "redis held no store epoch").count == 3 })
        let victim = try #require(try cluster.primaries().first)
        let replica = try #require(try cluster.replica(of: victim))

        cluster.kill(victim)
        #expect(eventually(20) { (try? cluster.cli(replica, "role"))?.hasPrefix("master") == true }, "the replica was promoted")
        // The promoted replica is read (on the reconnect, or at the next tick) and holds the
        // epoch its primary had.
        #expect(eventually(15) { shards(gateway, "store epoch found on a primary").contains("127.0.0.1:\(replica)") },
                "\(gateway.logText())")
        #expect(lines(gateway, containing: "redis came back empty").isEmpty, "\(gateway.logText())")
        #expect(try gateway.send("GET", "/readyz").json["warnings"] == nil)
        #expect(try gateway.admin("GET", "/metrics").text.contains("attestgate_store_resets_total 0"))
    }

    @Test func aReshardingThatMovesAShardsEpochSlotRaisesNoAlarm() async throws {
        let cluster = try await RedisCluster.start(nodeTimeout: 5000)
        let gateway = try gateway(cluster)
        defer { gateway.stop() }
        #expect(try eventually(10) { try everyShardHoldsAnEpoch(cluster) })
        #expect(eventually { shards(gateway, "redis held no store epoch").count == 3 })

        // The first slot of one primary, which holds its epoch key, moves to another.
        let primaries = try cluster.primaries()
        let source = primaries[0], target = primaries[1]
        let slot = try #require(try cluster.nodes().first { $0.port == source }?.slots.map(\.lowerBound).min())
        let sourceID = try #require(try cluster.id(of: source)), targetID = try #require(try cluster.id(of: target))
        try cluster.cli(target, "cluster", "setslot", String(slot), "importing", sourceID)
        try cluster.cli(source, "cluster", "setslot", String(slot), "migrating", targetID)
        let keys = try cluster.cli(source, "cluster", "getkeysinslot", String(slot), "100").split(separator: "\n").map(String.init)
        let moved = try #require(keys.first { $0.hasPrefix("ag:epoch:{") }, "the slot holds the epoch key: \(keys)")
        _ = try cluster.cli(source, ["migrate", "127.0.0.1", String(target), "", "0", "5000", "keys"] + keys)
        for port in primaries {
            try cluster.cli(port, "cluster", "setslot", String(slot), "node", targetID)
        }

        // The moved key is read where it went; the source gets a key in its new first slot.
        #expect(eventually(20) { shards(gateway, "earlier epoch key moved away").contains("127.0.0.1:\(source)") },
                "\(gateway.logText())")
        #expect(try cluster.cli(target, "get", moved).isEmpty == false)
        #expect(lines(gateway, containing: "redis came back empty").isEmpty, "\(gateway.logText())")
        #expect(try gateway.send("GET", "/readyz").json["warnings"] == nil)
    }
}
