import AGConfig
import AGPolicy
import AGRedis

/// Single-use challenges in Redis: `ag:{APPID}:ch:<challenge>` holds the issue time in ms (the
/// gateway's Redis-aligned clock), or `used:<ms>` once spent, with a TTL of twice the challenge
/// lifetime so an expired or used challenge stays distinguishable from one never issued.
final class RedisChallengeStore: ChallengeIssuer {
    private let redis: RedisClient
    private let time: any TimeSource

    init(redis: RedisClient, time: any TimeSource) {
        self.redis = redis
        self.time = time
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
    func issue(tenant: Tenant, ttl: Duration, completion: @escaping (Result<IssuedChallenge, StoreFailure>) -> Void) {
        let challenge = Self.newChallenge()
        let keepMs = ttl.milliseconds * 2
        redis.evalScript(DeviceScripts.issueChallenge, keys: [RedisDeviceStore.challengeKey(tenant, challenge)],
                         args: [String(time.nowMicroseconds), String(keepMs)]) { result in
            completion(RedisDeviceStore.store(result).flatMap { value in
                guard let issuedAt = value.int, issuedAt > 0 else { return .failure(StoreFailure(description: "challenge collision")) }
                return .success(IssuedChallenge(challenge: challenge, issuedAtMilliseconds: issuedAt))
            })
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
