import AGRedis

/// Scripts behind admin calls that must change state and announce it atomically.
enum AdminScripts {
    /// Marks a device revoked and announces it on `ag:events`, so every instance drops the
    /// device's cached tokens. KEYS[1] device hash; ARGV channel, event. 0 = no such device.
    static let revoke = RedisScript("""
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'rev', '1')
        redis.call('PUBLISH', ARGV[1], ARGV[2])
        return 1
        """)
}

/// Runtime changes announced between gateway instances.
enum GatewayEvents {
    static let channel = "ag:events"
}
