@testable import AGRedis
import Testing

/// Hash slots, key extraction and reply parsing: pure code, checked against the cluster
/// specification's vectors (the live cluster cross-checks them in RedisClusterTests).
@Suite struct ClusterRoutingTests {
    @Test func crc16MatchesTheSpecificationVector() {
        // Redis Cluster specification, appendix A: CRC16 of "123456789" is 0x31C3.
        #expect(HashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(HashSlot.crc16([]) == 0)
    }

    @Test(arguments: [("foo", UInt16(12182)), ("bar", 5061), ("{foo}.bar", 12182), ("a{bar}b", 5061)])
    func knownSlots(key: String, slot: UInt16) {
        #expect(HashSlot.slot(of: key) == slot)
    }

    @Test func hashTagRules() {
        // Examples from the specification's "Hash tags" section.
        #expect(HashSlot.slot(of: "{user1000}.following") == HashSlot.slot(of: "user1000"))
        #expect(String(decoding: HashSlot.hashedPart(of: Array("foo{}{bar}".utf8)), as: UTF8.self) == "foo{}{bar}")
        #expect(String(decoding: HashSlot.hashedPart(of: Array("foo{{bar}}zap".utf8)), as: UTF8.self) == "{bar")
        #expect(String(decoding: HashSlot.hashedPart(of: Array("foo{bar}{zap}".utf8)), as: UTF8.self) == "bar")
        #expect(String(decoding: HashSlot.hashedPart(of: Array("nobraces".utf8)), as: UTF8.self) == "nobraces")
        #expect(String(decoding: HashSlot.hashedPart(of: Array("open{only".utf8)), as: UTF8.self) == "open{only")
        #expect(HashSlot.slot(of: "ag:{TEAM.app}:dev:k1") == HashSlot.slot(of: "ag:{TEAM.app}:ch:c1"))
    }

    @Test func routesByKeysAndRefusesCrossSlot() {
        let tag = "ag:{T.app}"
        #expect(route(["GET", "\(tag):a"]) == .slot(HashSlot.slot(of: "T.app")))
        #expect(route(["EVALSHA", "abc", "2", "\(tag):a", "\(tag):b", "arg"]) == .slot(HashSlot.slot(of: "T.app")))
        #expect(route(["EVALSHA", "abc", "0", "arg"]) == .anyNode)
        #expect(route(["PING"]) == .anyNode)
        #expect(route(["XREAD", "COUNT", "10", "BLOCK", "100", "STREAMS", "\(tag):s", "0-0"]) == .slot(HashSlot.slot(of: "T.app")))
        #expect(route(["MSET", "\(tag):a", "1", "\(tag):b", "2"]) == .slot(HashSlot.slot(of: "T.app")))

        guard case .refused(let crossSlot) = route(["EVALSHA", "abc", "2", "ag:{A}:x", "ag:{B}:y"]) else {
            Issue.record("cross-slot script was routed")
            return
        }
        #expect(crossSlot.hasPrefix("CROSSSLOT"))
        guard case .refused = route(["DEL", "a", "b"]), case .refused = route(["MSET", "a", "1", "b", "2"]),
              case .refused(let unknown) = route(["FLUSHALL"]) else {
            Issue.record("cross-slot or one-node commands were routed")
            return
        }
        #expect(unknown.contains("FLUSHALL"))
    }

    @Test func parsesClusterSlots() throws {
        let reply: RedisValue = [
            [0, 5460, ["10.0.0.1", 7000, "id1"], ["10.0.0.4", 7003, "id4"]],
            [5461, 10922, ["", 7001, "id2", ["hostname", "redis-b"]]],
            [10923, 16000, ["10.0.0.3", 7002, "id3"]],
            [16001, 16383, ["?", 7009, "id9"]],
        ]
        let map = try SlotMap(clusterSlots: reply, queried: "10.0.0.2")
        #expect(map.owner(of: 0) == .tcp(host: "10.0.0.1", port: 7000))
        #expect(map.owner(of: 5461) == .tcp(host: "10.0.0.2", port: 7001))
        #expect(map.owner(of: 16000) == .tcp(host: "10.0.0.3", port: 7002))
        #expect(map.owner(of: 16383) == nil)
        #expect(!map.coversAllSlots)
        var moved = map
        for slot in UInt16(16001)...16383 { moved.assign(slot, to: .tcp(host: "10.0.0.3", port: 7002)) }
        #expect(moved.coversAllSlots)
        #expect(moved.servingPrimaries.count == 3)
        #expect(throws: RedisError.self) { try SlotMap(clusterSlots: [[0, 99999, ["h", 1, "id"]]], queried: "h") }
        #expect(throws: RedisError.self) { try SlotMap(clusterSlots: "nonsense", queried: "h") }
    }

    @Test func parsesRedirects() {
        #expect(ClusterRedirect("MOVED 3999 127.0.0.1:6381", queried: "x")
            == ClusterRedirect(kind: .moved, slot: 3999, target: .tcp(host: "127.0.0.1", port: 6381)))
        #expect(ClusterRedirect("ASK 3999 [::1]:6381", queried: "x")?.target == .tcp(host: "::1", port: 6381))
        #expect(ClusterRedirect("MOVED 3999 :6381", queried: "10.1.1.1")?.target == .tcp(host: "10.1.1.1", port: 6381))
        #expect(ClusterRedirect("MOVED 99999 h:1", queried: "x") == nil)
        #expect(ClusterRedirect("ERR wrong", queried: "x") == nil)
    }

    private func route(_ arguments: [String]) -> ClusterRoute {
        ClusterRouting.route(.strings(arguments))
    }
}

extension ClusterRedirect {
    init(kind: Kind, slot: UInt16, target: RedisURL.Endpoint) {
        let name = kind == .moved ? "MOVED" : "ASK"
        self.init("\(name) \(slot) \(target)", queried: "")!
    }
}
