import AGPolicy
import AGRedis
import Testing

@testable import AGGateway

/// Which epoch keys a check reads on each shard of a cluster, and what each read means, as slot
/// maps change under it: resharding, a failover, a shard added. No Redis: slot maps as
/// `CLUSTER SLOTS` would answer them.
@Suite struct StoreEpochPlanTests {
    static let a = RedisURL.Endpoint.tcp(host: "10.0.0.1", port: 7000)
    static let b = RedisURL.Endpoint.tcp(host: "10.0.0.2", port: 7000)
    static let c = RedisURL.Endpoint.tcp(host: "10.0.0.3", port: 7000)
    static let d = RedisURL.Endpoint.tcp(host: "10.0.0.4", port: 7000)

    /// A slot map from `(first, last, primary)` ranges.
    static func map(_ ranges: [(Int64, Int64, RedisURL.Endpoint)]) throws -> SlotMap {
        let reply = RedisValue.array(ranges.map { first, last, primary in
            guard case .tcp(let host, let port) = primary else { return .null }
            return [.integer(first), .integer(last), [.bulk(Array(host.utf8)), .integer(Int64(port)), "id"]]
        })
        return try SlotMap(clusterSlots: reply, queried: "10.0.0.9")
    }

    static let threeShards: [(Int64, Int64, RedisURL.Endpoint)] = [(0, 5460, a), (5461, 10922, b), (10923, 16383, c)]
    static func key(_ slot: UInt16) -> String { StoreEpochScript.key(forSlot: slot) }

    func plan(_ map: SlotMap, remembered: [String]) -> [RedisURL.Endpoint?: [String]] {
        Dictionary(uniqueKeysWithValues: StoreEpochWatch.plan(map, remembered: remembered, key: Self.key).map { ($0.shard, $0.keys) })
    }

    @Test func aFreshInstanceReadsTheKeyOfEachPrimarysFirstSlot() throws {
        let planned = plan(try Self.map(Self.threeShards), remembered: [])
        #expect(planned == [Self.a: [Self.key(0)], Self.b: [Self.key(5461)], Self.c: [Self.key(10923)]])
    }

    typealias MapChange = (name: String, ranges: [(Int64, Int64, RedisURL.Endpoint)], expected: [RedisURL.Endpoint?: [String]])

    static let changes: [MapChange] = [
        // A failover: another node serves a's slots and is asked for a's key.
        ("failover", [(0, 5460, d), (5461, 10922, b), (10923, 16383, c)],
         [d: [key(0)], b: [key(5461)], c: [key(10923)]]),
        // Resharding moved slot 0 to b: b is asked for both keys it holds now, a for the key of
        // its new first slot.
        ("slot 0 to b", [(0, 0, b), (1, 5460, a), (5461, 10922, b), (10923, 16383, c)],
         [a: [key(1)], b: [key(0), key(5461)].sorted(), c: [key(10923)]]),
        // A shard added and given slots of c: its first slot's key; the others keep theirs.
        ("shard added", [(0, 5460, a), (5461, 10922, b), (10923, 12000, c), (12001, 16383, d)],
         [a: [key(0)], b: [key(5461)], c: [key(10923)], d: [key(12001)]]),
        // c's slots are not served: nothing is asked of c, the rest as before.
        ("slots unserved", [(0, 5460, a), (5461, 10922, b)],
         [a: [key(0)], b: [key(5461)]]),
    ]

    @Test(arguments: 0..<changes.count)
    func afterTheMapChangesRememberedKeysAreReadWhereverTheirSlotsWent(_ index: Int) throws {
        let change = Self.changes[index]
        let remembered = [Self.key(0), Self.key(5461), Self.key(10923)]
        #expect(plan(try Self.map(change.ranges), remembered: remembered) == change.expected, "\(change.name)")
    }

    @Test func eachKeyIsRememberedOnItsOwn() {
        let epoch = StoreEpoch()
        let cases: [(key: String, value: String, created: Bool, expected: StoreEpoch.Observation)] = [
            ("k1", "x", true, .first(created: true)),
            ("k2", "y", false, .first(created: false)),
            ("k1", "x", false, .unchanged),
            ("k2", "y", false, .unchanged),
            // k2's shard was emptied: the check wrote a new value.
            ("k2", "z", true, .reset),
            ("k2", "z", false, .unchanged),
            ("k1", "x", false, .unchanged),
        ]
        for (index, step) in cases.enumerated() {
            #expect(epoch.observe(step.value, key: step.key, created: step.created) == step.expected, "step \(index)")
        }
        #expect(Set(epoch.rememberedKeys) == ["k1", "k2"])
        #expect(epoch.unacknowledgedResets.isEmpty, "a reset is the watch's to count, once per shard and check")
    }
}
