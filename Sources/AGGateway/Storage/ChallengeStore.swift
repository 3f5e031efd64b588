import AGConfig
import AGPolicy
import AGRedis

/// Single-use challenges in Redis: `ag:{APPID}:ch:<challenge>` holds the issue time in ms (Redis
/// clock), or `used:<ms>` once spent, with a TTL of twice the challenge lifetime so an expired
/// or used challenge stays distinguishable from one never issued.
final class ChallengeStore {
    private let redis: RedisClient

    /// Stores a fresh challenge; returns the issue time in Unix ms by the Redis clock.
    static let issueScript = RedisScript("""
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local ok = redis.call('SET', KEYS[1], now, 'PX', ARGV[1], 'NX')
        if not ok then return -1 end
        return now
        """)

    init(redis: RedisClient) {
        self.redis = redis
    }

    static func key(tenant: Tenant, challenge: String) -> String {
        tenant.keyPrefix + "ch:" + challenge
    }

    /// A new random challenge: 32 bytes from the system CSPRNG, hex-encoded.
    static func newChallenge() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for _ in 0..<4 {
            var word = generator.next() as UInt64
            for _ in 0..<8 {
                out.append(hex[Int((word >> 4) & 0xF)])
                out.append(hex[Int(word & 0xF)])
                word >>= 8
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Issues a challenge valid for `ttl`; completes with the challenge and its issue time (ms).
    func issue(tenant: Tenant, ttl: Duration, completion: @escaping (Result<(challenge: String, issuedAtMs: Int64), RedisError>) -> Void) {
        let challenge = Self.newChallenge()
        let keepMs = ttl.milliseconds * 2
        redis.evalScript(Self.issueScript, keys: [Self.key(tenant: tenant, challenge: challenge)], args: [String(keepMs)]) { result in
            switch result {
            case .success(let value):
                guard let issuedAt = value.int, issuedAt > 0 else {
                    completion(.failure(.server("challenge collision")))
                    return
                }
                completion(.success((challenge, issuedAt)))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
