import AGRedis

/// The store epoch (`ag:epoch`): a random value written once into an empty Redis. Each instance
/// remembers the value it first read; a Redis that restarted without its data (or was flushed)
/// no longer holds it, so the next check writes a new one and every instance sees the change.
public enum StoreEpochScript {
    /// The key; outside every tenant's hash tag (one key, one slot).
    public static let key = "ag:epoch"

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
