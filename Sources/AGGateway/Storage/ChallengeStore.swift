import AGCrypto
import AGPolicy
import AGRedis

/// Single-use challenges in Redis: `ag:{APPID}:ch:<challenge>` holds the issue time in ms (the
/// gateway's Redis-aligned clock), or `used:<ms>` once spent, with a TTL of twice the challenge
/// lifetime so an expired or used challenge stays distinguishable from one never issued.
///
/// The route's rate limits are taken here, like the refresh's `attest` bucket in its prepare
/// script. On one Redis server (standalone or Sentinel) every bucket, the client IP's too, is
/// taken inside the issuing script: one round trip, all or nothing. In a cluster a script may
/// only touch its own slot, so the buckets under the tenant's hash tag go into the issuing
/// script and the others (the client IP's) into one `RateLimitScript` call each, sent beside
/// it: two round trips in one write, and still all or nothing — when any bucket refuses (or a
/// call fails), what the others took is given back and an issued challenge deleted.
final class RedisChallengeStore: ChallengeIssuer {
    private let redis: RedisClient
    private let time: any TimeSource
    private let random: SecureRandomBuffer
    /// Every key lives on one server, so a script may touch any of them.
    private let oneServer: Bool

    init(redis: RedisClient, time: any TimeSource, random: SecureRandomBuffer) {
        self.redis = redis
        self.time = time
        self.random = random
        if case .cluster = redis.url.topology { oneServer = false } else { oneServer = true }
    }

    /// A new random challenge: 32 bytes from OpenSSL's CSPRNG (the worker's block of it),
    /// hex-encoded.
    static func newChallenge(using random: SecureRandomBuffer) -> String {
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in random.bytes(count: 32) {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    func issue(tenant: Tenant, ttl: Duration, buckets: [BucketCheck],
               completion: @escaping (Result<(RateLimitOutcome, IssuedChallenge?), StoreFailure>) -> Void) {
        let challenge = Self.newChallenge(using: random)
        let challengeKey = RedisDeviceStore.challengeKey(tenant, challenge)
        let now = time.nowMicroseconds
        if oneServer {
            return issueInOneScript(challenge, key: challengeKey, now: now, ttl: ttl, buckets: buckets, completion: completion)
        }
        let inline = buckets.indices.filter { buckets[$0].key.hasPrefix(tenant.keyPrefix) }
        let outside = buckets.indices.filter { !buckets[$0].key.hasPrefix(tenant.keyPrefix) }
        var issued: (decided: (allowed: Bool, decisions: [TokenBucket.Decision]), at: Int64)?
        var others: [(allowed: Bool, decisions: [TokenBucket.Decision])?] = Array(repeating: nil, count: outside.count)
        var failure: String?
        var outstanding = 1 + outside.count

        func settle() {
            outstanding -= 1
            guard outstanding == 0 else { return }
            let allowed = failure == nil && issued?.decided.allowed == true && others.allSatisfy { $0?.allowed == true }
            if !allowed {
                if let issued, issued.decided.allowed, issued.at > 0 { withdraw(challengeKey, inline.map { buckets[$0] }, now: now) }
                for (position, index) in outside.enumerated() where others[position]?.allowed == true {
                    refund(buckets[index], now: now)
                }
            }
            if let failure { return completion(.failure(StoreFailure(description: failure))) }
            var decisions = [TokenBucket.Decision](repeating: TokenBucket.Decision(allowed: false, limit: 0, remaining: 0, resetAt: 0, retryAfter: 0),
                                                   count: buckets.count)
            for (position, index) in inline.enumerated() { decisions[index] = issued!.decided.decisions[position] }
            for (position, index) in outside.enumerated() { decisions[index] = others[position]!.decisions[0] }
            let outcome = RateLimitOutcome.combining(buckets, allowed: allowed, decisions)
            guard allowed else { return completion(.success((outcome, nil))) }
            guard issued!.at > 0 else { return completion(.failure(StoreFailure(description: "challenge collision"))) }
            completion(.success((outcome, IssuedChallenge(challenge: challenge, issuedAtMilliseconds: issued!.at))))
        }

        let limits = inline.map { buckets[$0].limitPerMinute }
        redis.evalScript(DeviceScripts.takeAndIssueChallenge, keys: [challengeKey] + inline.map { buckets[$0].key },
                         args: [String(now), String(ttl.milliseconds * 2)] + limits.map { String($0) }) { result in
            switch Self.issued(result, limits: limits) {
            case .success(let reply): issued = reply
            case .failure(let reason): failure = failure ?? reason.description
            }
            settle()
        }
        for (position, index) in outside.enumerated() {
            let check = buckets[index]
            redis.evalScript(RateLimitScript.script, keys: [check.key], args: RateLimitScript.arguments([check], now: now)) { result in
                switch result {
                case .success(let value):
                    if let decided = RateLimitScript.decisions(from: value, limits: [check.limitPerMinute]) {
                        others[position] = decided
                    } else {
                        failure = failure ?? "unexpected rate-limit script reply"
                    }
                case .failure(let error):
                    failure = failure ?? error.description
                }
                settle()
            }
        }
    }

    /// `issue` on one Redis server: every bucket is taken inside the issuing script, so one
    /// call decides everything and nothing is ever given back.
    private func issueInOneScript(_ challenge: String, key challengeKey: String, now: Int64, ttl: Duration, buckets: [BucketCheck],
                                  completion: @escaping (Result<(RateLimitOutcome, IssuedChallenge?), StoreFailure>) -> Void) {
        var keys = [String]()
        keys.reserveCapacity(1 + buckets.count)
        keys.append(challengeKey)
        var args = [String]()
        args.reserveCapacity(2 + buckets.count)
        args.append(String(now))
        args.append(String(ttl.milliseconds * 2))
        var limits = [Int]()
        limits.reserveCapacity(buckets.count)
        for check in buckets {
            keys.append(check.key)
            args.append(String(check.limitPerMinute))
            limits.append(check.limitPerMinute)
        }
        redis.evalScript(DeviceScripts.takeAndIssueChallenge, keys: keys, args: args) { result in
            let decided: (allowed: Bool, decisions: [TokenBucket.Decision]), at: Int64
            switch Self.issued(result, limits: limits) {
            case .success(let reply): (decided, at) = reply
            case .failure(let reason): return completion(.failure(reason))
            }
            let outcome = RateLimitOutcome.combining(buckets, allowed: decided.allowed, decided.decisions)
            guard decided.allowed else { return completion(.success((outcome, nil))) }
            guard at > 0 else { return completion(.failure(StoreFailure(description: "challenge collision"))) }
            completion(.success((outcome, IssuedChallenge(challenge: challenge, issuedAtMilliseconds: at))))
        }
    }

    /// `takeAndIssueChallenge`'s reply: the buckets' decisions (`limits` in their order) and the
    /// issue time (0 refused, -1 a collision), or why there is none.
    private static func issued(_ result: Result<RedisValue, RedisError>, limits: [Int])
        -> Result<(decided: (allowed: Bool, decisions: [TokenBucket.Decision]), at: Int64), StoreFailure> {
        RedisDeviceStore.store(result).flatMap { value in
            guard let reply = value.array, reply.count == 2, let decided = RateLimitScript.decisions(from: reply[0], limits: limits),
                  let at = reply[1].int else {
                return .failure(StoreFailure(description: "unexpected reply from the challenge script"))
            }
            return .success((decided, at))
        }
    }

    /// Deletes a challenge that was never handed out and gives its buckets their tokens back.
    private func withdraw(_ challengeKey: String, _ buckets: [BucketCheck], now: Int64) {
        redis.evalScript(DeviceScripts.withdrawChallenge, keys: [challengeKey] + buckets.map(\.key),
                         args: [String(now)] + buckets.map { String($0.limitPerMinute) }) { _ in }
    }

    private func refund(_ check: BucketCheck, now: Int64) {
        redis.evalScript(AdmissionScripts.refund, keys: [check.key], args: [String(now), String(check.limitPerMinute)]) { _ in }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Whole microseconds.
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
