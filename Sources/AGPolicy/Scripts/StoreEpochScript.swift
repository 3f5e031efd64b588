import AGRedis

/// The store epoch: a random value written once into an empty Redis. Each instance remembers
/// the value it first read; a Redis that restarted without its data (or was flushed) no longer
/// holds it, so the next check writes a new one and every instance sees the change.
///
/// One server or a Sentinel-managed primary has one epoch, `ag:epoch`. A Redis Cluster has one
/// per shard (`key(forSlot:)`): a shard keeps or loses its data on its own.
public enum StoreEpochScript {
    /// The key on one server; outside every tenant's hash tag.
    public static let key = "ag:epoch"

    /// The epoch key kept in `slot`, and so on the primary that serves it: `ag:epoch:{<tag>}`,
    /// the tag being the first of `0`, `1`, … `z`, `10`, … (base 36) that hashes to `slot`.
    /// Every instance names the same key for a slot; no slot needs more than 87,573 tries.
    public static func key(forSlot slot: UInt16) -> String {
        var candidate = 0
        while HashSlot.slot(of: String(candidate, radix: 36)) != slot { candidate += 1 }
        return "ag:epoch:{\(String(candidate, radix: 36))}"
    }

    /// Reads the epoch, writing `ARGV[2]` first when there is none (atomically, so instances
    /// checking an empty Redis together agree on one value).
    ///
    /// KEYS: epoch. ARGV: now, proposed epoch. Reply: `{created (0/1), epoch}`.
    public static let script = RedisScript(LuaFragments.now + """
        local epoch = redis.call('GET', KEYS[1])
        if epoch then return {0, epoch} end
        redis.call('SET', KEYS[1], ARGV[2])
        return {1, ARGV[2]}
        """)
}
