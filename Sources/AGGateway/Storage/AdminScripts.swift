import AGConfig
import AGPolicy
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

extension AdminScripts {
    /// Stores an imported device key (not revoked) and announces it, so instances that had the
    /// device in their revoked set forget it. KEYS[1] device hash; ARGV pk, counter, env, created
    /// ms, channel, event.
    static let importKey = RedisScript("""
        redis.call('HSET', KEYS[1], 'pk', ARGV[1], 'ctr', ARGV[2], 'rev', '0', 'env', ARGV[3], 'created', ARGV[4])
        redis.call('PUBLISH', ARGV[5], ARGV[6])
        return 1
        """)
}

/// Runtime changes announced between gateway instances.
enum GatewayEvents {
    static let channel = "ag:events"
}
