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
    public static let refund = RedisScript(LuaFragments.now + refundFunction + """
        return refund_bucket(KEYS[1], ARGV[2], now_us)
        """)

    /// Defines the Lua function `refund_bucket(key, limit, now_us)` of `refund`, so a script
    /// that withdraws more than a token (`DeviceScripts.withdrawChallenge`) gives it back the
    /// same way. Returns 1 refunded, 0 not (the bucket expired and reads as full anyway).
    public static let refundFunction = RateLimitScript.refillFunction + """
        local function refund_bucket(key, limit_arg, now_us)
          local limit, cap, u, ts, found = refilled_bucket(key, limit_arg, now_us)
          if not limit or not found then return 0 end
          u = math.min(cap, u + COST)
          local toFull = math.ceil((cap - u) / limit)
          redis.call('HSET', key, 'tokens', string.format('%.0f', u), 'ts', string.format('%.0f', ts))
          redis.call('PEXPIRE', key, math.ceil(toFull / 1000) + 1000)
          return 1
        end

        """

    /// A proxied token's device record and the tenant's device epoch, read in one step (both
    /// keys carry the tenant's hash tag): a worker that found the record in good standing at
    /// epoch E need not read it again while the epoch stays E (see `RateLimiter+Devices`).
    ///
    /// KEYS: the tenant's device epoch, the device hash. ARGV: now (Unix µs), epoch seed (used
    /// when the epoch key is missing). Reply: `{epoch, standing}`; standing is `'revoked'`,
    /// `'unknown'` when the record is gone (deleted, invalidated for re-attestation, or Redis
    /// restarted empty), else `'active'`.
    public static let deviceStanding = RedisScript(LuaFragments.now + LuaFragments.deviceEpoch + """
        return {device_epoch(KEYS[1], ARGV[2]), device_standing(KEYS[2])}
        """)

    /// The epoch and standing in a `deviceStanding` reply; nil when it has the wrong shape.
    public static func standing(from reply: RedisValue) -> (epoch: String, standing: DeviceStanding)? {
        guard let parts = reply.array, parts.count == 2, let epoch = parts[0].string,
              let word = parts[1].string, let standing = DeviceStanding(rawValue: word) else { return nil }
        return (epoch, standing)
    }

    /// A device's standing as `deviceStanding` reports it.
    public enum DeviceStanding: String, Sendable, Hashable {
        case active
        case revoked
        case unknown
    }
}
