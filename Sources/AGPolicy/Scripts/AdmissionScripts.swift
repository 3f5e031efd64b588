import AGRedis

/// Scripts that complete the token-bucket decision in Redis Cluster, where a tenant bucket
/// (`ag:{APPID}:…`) and a client-IP bucket (`ag:ip:{IP}:…`) live in different slots and no
/// script may touch both.
public enum AdmissionScripts {
    /// Gives back the token a request took from one bucket, when another bucket of the same
    /// request refused it: the buckets are taken in parallel, one script each, and a request
    /// refused by any bucket must in the end consume none (see `RateLimiter`).
    ///
    /// KEYS: the bucket. ARGV: now (Unix µs), its limit per minute. Refills to now exactly as
    /// `take_buckets` does, then adds one token, capped at the capacity. A bucket that has
    /// expired meanwhile reads as full anyway and is left alone. Reply: 1 refunded, 0 not.
    public static let refund = RedisScript(LuaFragments.now + """
        local COST = \(TokenBucket.unitsPerToken)
        local limit = tonumber(ARGV[2])
        local cap = limit * COST
        local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
        local u, ts = tonumber(state[1]), tonumber(state[2])
        if u == nil or ts == nil then return 0 end
        if u < 0 then u = 0 end
        local elapsed = now_us - ts
        if elapsed < 0 then elapsed = 0 end
        if elapsed > COST then elapsed = COST end
        u = math.min(cap, u + elapsed * limit)
        if now_us > ts then ts = now_us end
        u = math.min(cap, u + COST)
        local toFull = math.ceil((cap - u) / limit)
        redis.call('HSET', KEYS[1], 'tokens', string.format('%.0f', u), 'ts', string.format('%.0f', ts))
        redis.call('PEXPIRE', KEYS[1], math.ceil(toFull / 1000) + 1000)
        return 1
        """)

    /// A proxied request with a token: the device's standing, then the tenant's `api` bucket,
    /// in one round trip (both keys carry the tenant's hash tag).
    ///
    /// KEYS: the bucket(s), then the device hash last. ARGV: now (Unix µs), each bucket's limit.
    /// Reply: `{'revoked'}` when the device is revoked, `{'unknown'}` when its record is gone
    /// (deleted, invalidated for re-attestation, or Redis restarted empty) — neither takes a
    /// token —, else `{'active', <take_buckets reply>}`.
    public static let proxyAdmission = RedisScript(LuaFragments.now + RateLimitScript.takeFunction + """
        local device = redis.call('HMGET', KEYS[#KEYS], 'pk', 'rev')
        if not device[1] then return {'unknown'} end
        if device[2] == '1' then return {'revoked'} end
        local buckets = {}
        for i = 1, #KEYS - 1 do buckets[i] = KEYS[i] end
        return {'active', take_buckets(now_us, buckets, ARGV, 2)}
        """)

    /// A device's standing as `proxyAdmission` reports it.
    public enum DeviceStanding: String, Sendable, Hashable {
        case active
        case revoked
        case unknown
    }
}
