import AGPolicy
import AGRedis
import Testing

/// `StoreEpochScript.key(forSlot:)`: a cluster shard's epoch key lives in the slot it was named
/// for, and every instance names the same key.
@Suite struct StoreEpochKeyTests {
    /// Every slot's key hashes to it; the search is the same on every instance.
    @Test(arguments: [0, 1, 5460, 5461, 10922, 10923, 12001, 16383, Int(HashSlot.slot(of: StoreEpochScript.key))])
    func theKeyOfASlotLivesInThatSlot(_ slot: Int) {
        let key = StoreEpochScript.key(forSlot: UInt16(slot))
        #expect(key.hasPrefix("ag:epoch:{") && key.hasSuffix("}"))
        #expect(HashSlot.slot(of: key) == UInt16(slot))
        #expect(StoreEpochScript.key(forSlot: UInt16(slot)) == key)
    }

    /// The search ends for every slot, within the tries `key(forSlot:)` states: the first
    /// 87,573 tags reach all 16,384 slots, and the last of them is the first to reach its own.
    @Test func theFirst87573TagsReachEverySlot() {
        var reached = Set<UInt16>()
        for candidate in 0..<87_573 { reached.insert(HashSlot.slot(of: String(candidate, radix: 36))) }
        #expect(reached.count == HashSlot.count)
        #expect(StoreEpochScript.key(forSlot: HashSlot.slot(of: String(87_572, radix: 36))) == "ag:epoch:{1vkk}")
    }
}
