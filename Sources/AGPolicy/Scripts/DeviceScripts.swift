import AGRedis

/// The attestation routes' atomic steps in Redis (DESIGN section 10): each route runs one
/// script before its signature check and one after it.
///
/// `ag:{APPID}:dev:<keyId>` is a hash: `pk` (base64 X9.63), `ctr`, `rev` (0/1), `env`, `subj`,
/// `created`, `seen` (Unix ms), `rcpt`. Every key a script touches carries the tenant's hash
/// tag, so each script touches one cluster slot. `ARGV[1]` is always now (Unix µs).
public enum DeviceScripts {
    /// The refresh's first round trip: the tenant `attest` bucket, then device, quota and
    /// challenge, before the signature check. Only when everything passes is the challenge
    /// spent (and a grace period left from a lower limit ended); a refused request changes nothing (except starting the tenant's grace period the
    /// first time it is seen over its limit), and a rate-limited one not even that.
    ///
    /// KEYS: device, challenge, mad set, grace, attest bucket. ARGV: now, keyId, challenge ttl
    /// ms, mad limit (-1 = unlimited), grace ms, mad/grace key ttl seconds, attest limit per
    /// minute. Reply: `{bucket reply (see RateLimitScript), outcome}` where outcome is
    /// `{'ok', pk, ctr, subj}` or a refusal `{code, …}`.
    public static let prepareRefresh = RedisScript(LuaFragments.now + RateLimitScript.takeFunction + LuaFragments.quotaAndChallenge + """
        local bucket = take_buckets(now_us, {KEYS[5]}, ARGV, 7)
        if bucket[1] ~= 1 then return {bucket, {'rate_limited'}} end
        local dev = redis.call('HMGET', KEYS[1], 'pk', 'ctr', 'rev', 'subj')
        if not dev[1] then return {bucket, {'not_found'}} end
        if dev[3] == '1' then return {bucket, {'forbidden'}} end
        local refusal = quota_and_challenge(now, ARGV[2], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[3]),
                                            tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
        if refusal then return {bucket, refusal} end
        return {bucket, {'ok', dev[1], dev[2] or '0', dev[4] or ''}}
        """)

    /// After a valid signature: compare-and-set the counter, link the subject, count the device
    /// for the month, read the subscription.
    ///
    /// KEYS: device, mad set, subject (or the device key again when there is none). ARGV: now,
    /// keyId, expected counter, new counter, subject id ('' = keep), mad ttl seconds.
    /// Reply: `{'ok', subject, subscription, newlyCounted, count}` or `{refusal}`.
    public static let commitRefresh = RedisScript(LuaFragments.now + LuaFragments.countedReply + """
        local dev = redis.call('HMGET', KEYS[1], 'ctr', 'rev', 'subj')
        if not dev[1] then return {'not_found'} end
        if dev[2] == '1' then return {'forbidden'} end
        if dev[1] ~= ARGV[3] then return {'counter_conflict'} end
        redis.call('HSET', KEYS[1], 'ctr', ARGV[4], 'seen', now)
        local subject = dev[3] or ''
        if ARGV[5] ~= '' then
          subject = ARGV[5]
          redis.call('HSET', KEYS[1], 'subj', subject)
        end
        return counted(ARGV[2], KEYS[2], subject, KEYS[3], KEYS[1], ARGV[6])
        """)

    /// Invalidates a stored attestation after an assertion that its own key signed was refused
    /// (wrong RP ID hash, counter not increased). Deletes the record only while it still holds
    /// that key and the counter the assertion was judged against, and is not revoked: a device
    /// that re-attested meanwhile keeps its new record, a key an operator imported again
    /// meanwhile (a new counter) is kept (a race sweep, stop 35: a stale refresh deleted the
    /// record a concurrent import had just answered 200 for, in 66 of 150 trials), and a
    /// revocation (an operator's decision) is never erased by a refresh. A deletion bumps the
    /// tenant's device epoch, so every worker reads the record again (and refuses).
    ///
    /// KEYS: device, the tenant's device epoch. ARGV: now, pk (base64 X9.63) the assertion
    /// verified with, epoch seed, the stored counter it was judged against. Reply: 1 deleted, 0
    /// kept (gone, replaced, imported again or revoked).
    public static let invalidate = RedisScript(LuaFragments.now + LuaFragments.deviceEpoch + """
        local dev = redis.call('HMGET', KEYS[1], 'pk', 'rev', 'ctr')
        if dev[1] ~= ARGV[2] or dev[2] == '1' then return 0 end
        if tonumber(dev[3] or '0') ~= tonumber(ARGV[4]) then return 0 end
        redis.call('DEL', KEYS[1])
        bump_device_epoch(KEYS[2], ARGV[3])
        return 1
        """)

    /// Validate's first round trip: revocation, quota, challenge. A keyId already on record is
    /// replaced later (re-attestation after `reattest_required`), except a revoked one:
    /// revocation is an operator decision that a device cannot undo by attesting again.
    ///
    /// KEYS: device, challenge, mad set, grace. ARGV: now, keyId, challenge ttl ms, mad limit
    /// (-1 = unlimited), grace ms, mad/grace key ttl seconds. Reply `{'ok', subject}` or a
    /// refusal `{code, …}`.
    public static let prepareAttestation = RedisScript(LuaFragments.now + LuaFragments.quotaAndChallenge + """
        local dev = redis.call('HMGET', KEYS[1], 'rev', 'subj')
        if dev[1] == '1' then return {'forbidden'} end
        local refusal = quota_and_challenge(now, ARGV[2], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[3]),
                                            tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
        if refusal then return refusal end
        return {'ok', dev[2] or ''}
        """)

    /// Stores an attested key with counter 0.
    ///
    /// KEYS: device, mad set, subject (or the device key again when there is none). ARGV: now,
    /// keyId, pk (base64 X9.63), env, receipt (base64), subject id ('' = keep the recorded
    /// one), mad ttl seconds. Reply `{'ok', subject, subscription, newlyCounted, count}` or
    /// `{'forbidden'}`.
    public static let commitAttestation = RedisScript(LuaFragments.now + LuaFragments.countedReply + """
        local old = redis.call('HMGET', KEYS[1], 'rev', 'subj')
        if old[1] == '1' then return {'forbidden'} end
        local subject = ARGV[6]
        if subject == '' then subject = old[2] or '' end
        redis.call('DEL', KEYS[1])
        redis.call('HSET', KEYS[1], 'pk', ARGV[3], 'ctr', '0', 'rev', '0', 'env', ARGV[4], 'created', now, 'seen', now,
          'rcpt', ARGV[5])
        if subject ~= '' then redis.call('HSET', KEYS[1], 'subj', subject) end
        return counted(ARGV[2], KEYS[2], subject, KEYS[3], KEYS[1], ARGV[7])
        """)

    /// Stores a fresh challenge with its issue time (ms) unless it exists.
    ///
    /// KEYS: challenge. ARGV: now, keep ms (twice the ttl). Reply: the issue time, or -1 on a
    /// collision.
    public static let issueChallenge = RedisScript(LuaFragments.now + """
        local ok = redis.call('SET', KEYS[1], now, 'PX', ARGV[2], 'NX')
        if not ok then return -1 end
        return now
        """)

    /// `GET …/challenge` in one round trip for its tenant: takes a token from each bucket given
    /// (`RateLimitScript`'s maths, all or none) — on one Redis server all of the route's, in a
    /// cluster those in the challenge's slot (the tenant `challenge` bucket) — and only when
    /// they all had one stores the challenge as `issueChallenge` does. A refused request writes
    /// nothing. In a cluster the buckets of other slots (the client IP's) are taken by their own
    /// call beside it; when one of those refuses, `withdrawChallenge` undoes this.
    ///
    /// KEYS: challenge, then the buckets. ARGV: now, keep ms (twice the ttl), then each
    /// bucket's limit per minute. Reply: `{bucket reply (see RateLimitScript), issued}` where
    /// issued is the issue time (ms), 0 when a bucket refused, -1 on a collision.
    public static let takeAndIssueChallenge = RedisScript(LuaFragments.now + RateLimitScript.takeFunction + """
        local buckets = {}
        for i = 2, #KEYS do buckets[i - 1] = KEYS[i] end
        local bucket = take_buckets(now_us, buckets, ARGV, 3)
        if bucket[1] ~= 1 then return {bucket, 0} end
        local ok = redis.call('SET', KEYS[1], now, 'PX', ARGV[2], 'NX')
        if not ok then return {bucket, -1} end
        return {bucket, now}
        """)

    /// Undoes `takeAndIssueChallenge` for a request that another slot's bucket refused (or that
    /// could not be decided): the challenge, never handed out, is deleted and each bucket gets
    /// its token back (`AdmissionScripts.refund_bucket`).
    ///
    /// KEYS: challenge, then the buckets. ARGV: now, then each bucket's limit per minute.
    /// Reply: 1.
    public static let withdrawChallenge = RedisScript(LuaFragments.now + AdmissionScripts.refundFunction + """
        redis.call('DEL', KEYS[1])
        for i = 2, #KEYS do refund_bucket(KEYS[i], ARGV[i], now_us) end
        return 1
        """)

    /// Marks a device revoked and bumps the tenant's device epoch in the same step: from the
    /// next request on refresh answers 403, and every worker reads the record of each cached
    /// token again at its next lease (within `LeaseSizing.lifetimeMicroseconds`) and refuses
    /// the device's tokens (`AdmissionScripts.deviceStanding`).
    /// KEYS: device hash, the tenant's device epoch. ARGV: now, epoch seed. 0 = no such device.
    public static let revoke = RedisScript(LuaFragments.now + LuaFragments.deviceEpoch + """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'rev', '1')
        bump_device_epoch(KEYS[2], ARGV[2])
        return 1
        """)

    /// Stores an imported device key (not revoked). KEYS: device hash. ARGV: now, pk, counter,
    /// env. No epoch bump: an import (or a restore over a revoked record) makes no token
    /// invalid, and workers never remember a refusal.
    public static let importKey = RedisScript(LuaFragments.now + """
        redis.call('HSET', KEYS[1], 'pk', ARGV[2], 'ctr', ARGV[3], 'rev', '0', 'env', ARGV[4], 'created', now)
        return 1
        """)
}

/// Why a device script refused a request: the statuses the scripts return besides `ok`.
public enum DeviceRefusal: Sendable, Equatable {
    case rateLimited
    case notFound
    case forbidden
    case challengeInvalid
    case challengeAlreadyUsed
    case challengeExpired
    case quotaExceeded(limit: Int, current: Int)
    /// The commit's compare-and-set lost to another refresh of the same assertion counter.
    case counterConflict

    /// The refusal a script reply `{code, …}` names; nil for anything a script never returns
    /// (a reply of the wrong shape is a store failure, never a guess at a contract error).
    public init?(reply parts: [String]) {
        switch parts.first {
        case "rate_limited": self = .rateLimited
        case "not_found": self = .notFound
        case "forbidden": self = .forbidden
        case "challenge_invalid": self = .challengeInvalid
        case "challenge_already_used": self = .challengeAlreadyUsed
        case "challenge_expired": self = .challengeExpired
        case "counter_conflict": self = .counterConflict
        case "quota_exceeded":
            guard parts.count == 3, let limit = Int(parts[1]), let current = Int(parts[2]) else { return nil }
            self = .quotaExceeded(limit: limit, current: current)
        default: return nil
        }
    }
}
