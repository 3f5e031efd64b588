import AGConfig
import AGPolicy
import AGRedis
import Foundation

/// Device records and the refresh's two atomic steps in Redis (DESIGN section 10).
///
/// `ag:{APPID}:dev:<keyId>` is a hash: `pk` (base64 X9.63), `ctr`, `rev` (0/1), `env`, `subj`,
/// `created`, `seen` (Unix ms). Monthly active devices: set `ag:{APPID}:mad:<YYYYMM>`, grace
/// start `ag:{APPID}:grace:<YYYYMM>`. Subscriptions: `ag:{APPID}:subj:<subjectId>` (JSON).
/// Every key of one tenant carries the tenant's hash tag, so each script touches one slot.
final class DeviceStore {
    let redis: RedisClient

    init(redis: RedisClient) {
        self.redis = redis
    }

    static func deviceKey(_ tenant: Tenant, _ keyID: String) -> String { tenant.keyPrefix + "dev:" + keyID }
    static func madKey(_ tenant: Tenant, _ month: String) -> String { tenant.keyPrefix + "mad:" + month }
    static func graceKey(_ tenant: Tenant, _ month: String) -> String { tenant.keyPrefix + "grace:" + month }
    static func subjectKey(_ tenant: Tenant, _ subjectID: String) -> String { tenant.keyPrefix + "subj:" + subjectID }

    /// Lua `quota_and_challenge(now, keyId, challengeKey, madKey, graceKey, challengeTTL,
    /// madLimit, graceMs, monthKeyTTL)`, shared by the refresh's and the attestation's prepare
    /// scripts: a device not yet counted this month passes while the tenant is under its
    /// monthly-active-device limit or within the grace period (which starts the first time the
    /// tenant is seen over it); then the challenge must be known, unused and fresh, and is spent.
    /// Returns nil when the request may go on, else the refusal `{code, …}`.
    static let quotaAndChallengeFunction = """
        local function quota_and_challenge(now, key_id, challenge_key, mad_key, grace_key, ttl, limit, grace, key_ttl)
          if limit >= 0 and redis.call('SISMEMBER', mad_key, key_id) == 0 then
            local current = redis.call('SCARD', mad_key)
            if current >= limit then
              local started = redis.call('GET', grace_key)
              if not started then
                redis.call('SET', grace_key, now, 'EX', key_ttl)
                started = now
              end
              if now - tonumber(started) > grace then
                return {'quota_exceeded', tostring(limit), tostring(current)}
              end
            end
          end
          local c = redis.call('GET', challenge_key)
          if not c then return {'challenge_invalid'} end
          if string.sub(c, 1, 5) == 'used:' then return {'challenge_already_used'} end
          if now - tonumber(c) > ttl then return {'challenge_expired'} end
          redis.call('SET', challenge_key, 'used:' .. now, 'KEEPTTL')
          return nil
        end

        """

    /// The tenant `attest` bucket, then quota, device and challenge checks, before the signature
    /// check, in one round trip. Only when everything passes is the challenge spent; a refused
    /// request changes nothing (except starting the tenant's grace period the first time it is
    /// seen over its limit), and a rate-limited one not even that.
    ///
    /// KEYS: device, challenge, mad set, grace, attest bucket. ARGV: keyId, challenge ttl ms, mad
    /// limit (-1 = unlimited), grace ms, mad/grace key ttl seconds, attest limit per minute.
    /// Reply: `{bucket reply (see RateLimitScript), outcome}`.
    static let prepareScript = RedisScript(RateLimitScript.redisTimePrelude + RateLimitScript.takeFunction + quotaAndChallengeFunction + """
        local bucket = take_buckets(now, {KEYS[5]}, {ARGV[6]})
        if bucket[1] ~= 1 then return {bucket, {'rate_limited'}} end
        now = math.floor(now / 1000)
        local dev = redis.call('HMGET', KEYS[1], 'pk', 'ctr', 'rev', 'subj')
        if not dev[1] then return {bucket, {'not_found'}} end
        if dev[3] == '1' then return {bucket, {'forbidden'}} end
        local refusal = quota_and_challenge(now, ARGV[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]),
                                            tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
        if refusal then return {bucket, refusal} end
        return {bucket, {'ok', dev[1], dev[2] or '0', dev[4] or ''}}
        """)

    /// After a valid signature: compare-and-set the counter, link the subject, count the device
    /// for the month, read the subscription.
    ///
    /// KEYS: device, mad set, subject (or the device key again when there is none).
    /// ARGV: keyId, expected counter, new counter, subject id ('' = keep), mad ttl seconds.
    static let commitScript = RedisScript("""
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local dev = redis.call('HMGET', KEYS[1], 'ctr', 'rev', 'subj')
        if not dev[1] then return {'not_found'} end
        if dev[2] == '1' then return {'forbidden'} end
        if dev[1] ~= ARGV[2] then return {'counter_conflict'} end
        redis.call('HSET', KEYS[1], 'ctr', ARGV[3], 'seen', now)
        local subject = dev[3] or ''
        if ARGV[4] ~= '' then
          subject = ARGV[4]
          redis.call('HSET', KEYS[1], 'subj', subject)
        end
        local added = redis.call('SADD', KEYS[2], ARGV[1])
        if added == 1 then redis.call('EXPIRE', KEYS[2], ARGV[5]) end
        local count = redis.call('SCARD', KEYS[2])
        local subscription = ''
        if subject ~= '' and KEYS[3] ~= KEYS[1] then subscription = redis.call('GET', KEYS[3]) or '' end
        return {'ok', subject, subscription, added, count}
        """)

    /// Drops the stored attestation after a failed assertion: the device must attest again.
    func invalidate(tenant: Tenant, keyID: String, completion: @escaping (Result<Void, RedisError>) -> Void) {
        redis.send(["DEL", Self.deviceKey(tenant, keyID)]) { result in completion(result.map { _ in () }) }
    }

    enum PrepareOutcome {
        case ready(publicKey: String, counter: UInt32, subjectID: String?)
        case refused(GatewayError)
        case rateLimited
    }

    /// Completes with the `attest` bucket's decision (for the headers) and the outcome.
    func prepare(tenant: Tenant, keyID: String, challengeKey: String, month: String, challengeTTL: Duration,
                 madLimit: DeviceLimit, grace: Duration, bucket: BucketCheck,
                 completion: @escaping (Result<(RateLimitOutcome, PrepareOutcome), RedisError>) -> Void) {
        let limit: Int
        switch madLimit {
        case .limited(let value): limit = value
        case .unlimited: limit = -1
        }
        let keys = [Self.deviceKey(tenant, keyID), challengeKey, Self.madKey(tenant, month), Self.graceKey(tenant, month), bucket.key]
        let args = [keyID, String(challengeTTL.milliseconds), String(limit), String(grace.milliseconds), String(Self.monthKeyTTL),
                    String(bucket.limitPerMinute)]
        redis.evalScript(Self.prepareScript, keys: keys, args: args) { result in
            completion(result.flatMap { value in
                guard let reply = value.array, reply.count == 2,
                      let decided = RateLimitScript.decisions(from: reply[0], limits: [bucket.limitPerMinute]),
                      let parts = reply[1].array?.map({ $0.string ?? "" }), let status = parts.first else {
                    return .failure(.server("unexpected reply from the prepare script"))
                }
                let rateLimit = RateLimitOutcome.combining([bucket], allowed: decided.allowed, decided.decisions)
                switch status {
                case "ok":
                    guard parts.count == 4, let counter = UInt32(parts[2]) else { return .failure(.server("corrupt device record")) }
                    return .success((rateLimit, .ready(publicKey: parts[1], counter: counter, subjectID: parts[3].isEmpty ? nil : parts[3])))
                case "rate_limited":
                    return .success((rateLimit, .rateLimited))
                case "quota_exceeded":
                    return .success((rateLimit, .refused(.quotaExceeded(limit: Int(parts[1]) ?? limit, current: Int(parts[2]) ?? 0))))
                default:
                    return .success((rateLimit, .refused(RefreshError.error(for: status))))
                }
            })
        }
    }

    enum CommitOutcome {
        case committed(subjectID: String?, subscription: String?, newlyCounted: Bool, monthlyCount: Int)
        case refused(String)

        /// A commit script's reply: `{'ok', subject, subscription, newlyCounted, count}` or
        /// `{refusal}`.
        static func parse(_ reply: Result<RedisValue, RedisError>, script: String) -> Result<CommitOutcome, RedisError> {
            reply.flatMap { value in
                guard let array = value.array, let status = array.first?.string else {
                    return .failure(.server("unexpected reply from the \(script) script"))
                }
                guard status == "ok", array.count == 5 else { return .success(.refused(status)) }
                let subject = array[1].string ?? ""
                let subscription = array[2].string ?? ""
                return .success(.committed(subjectID: subject.isEmpty ? nil : subject,
                                           subscription: subscription.isEmpty ? nil : subscription,
                                           newlyCounted: array[3].int == 1, monthlyCount: Int(array[4].int ?? 0)))
            }
        }
    }

    func commit(tenant: Tenant, keyID: String, month: String, expectedCounter: UInt32, newCounter: UInt32,
                subjectID: String?, knownSubjectID: String?, completion: @escaping (Result<CommitOutcome, RedisError>) -> Void) {
        let subjectKey = (subjectID ?? knownSubjectID).map { Self.subjectKey(tenant, $0) } ?? Self.deviceKey(tenant, keyID)
        redis.evalScript(Self.commitScript,
                         keys: [Self.deviceKey(tenant, keyID), Self.madKey(tenant, month), subjectKey],
                         args: [keyID, String(expectedCounter), String(newCounter), subjectID ?? "", String(Self.monthKeyTTL)]) { result in
            completion(CommitOutcome.parse(result, script: "commit"))
        }
    }

    /// Month keys outlive their month by a few days so usage can still be read.
    static let monthKeyTTL = 40 * 86_400

    /// `YYYYMM` of `date` in UTC.
    static func month(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let month = Int(parts.tm_mon) + 1
        return "\(Int(parts.tm_year) + 1900)" + (month < 10 ? "0\(month)" : "\(month)")
    }
}

/// The refresh endpoint's contract errors.
enum RefreshError {
    static func error(for status: String) -> GatewayError {
        switch status {
        case "not_found":
            GatewayError(status: 404, code: "not_found", message: "no attestation found for this key id; attest first")
        case "forbidden":
            GatewayError(status: 403, code: "forbidden", message: "the attestation for this key has been revoked")
        case "challenge_invalid":
            GatewayError(status: 400, code: "challenge_invalid", message: "unknown challenge")
        case "challenge_already_used":
            GatewayError(status: 400, code: "challenge_already_used", message: "challenge already used")
        case "challenge_expired":
            GatewayError(status: 400, code: "challenge_expired", message: "challenge expired")
        default:
            reattestRequired
        }
    }

    static let reattestRequired = GatewayError(
        status: 409, code: "reattest_required",
        message: "assertion verification failed; the stored attestation is invalidated",
        hint: "drop the local key and attest again")
}

extension GatewayError {
    static func quotaExceeded(limit: Int, current: Int) -> GatewayError {
        var error = GatewayError(status: 402, code: "quota_exceeded",
                                 message: "monthly active device limit reached and the grace period is over")
        error.extra = [("limit", limit), ("current", current)]
        return error
    }
}
