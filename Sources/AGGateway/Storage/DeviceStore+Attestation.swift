import AGConfig
import AGPolicy
import AGRedis
import Foundation

/// The validate endpoint's two atomic steps: `prepareAttestation` before the attestation is
/// verified (revocation, quota, challenge), `commitAttestation` after it (store the key).
///
/// A keyId already on record is replaced (re-attestation after `reattest_required`), except a
/// revoked one: revocation is an operator decision that a device cannot undo by attesting the
/// same key again, so it stays revoked (403 `forbidden`) until an admin imports or deletes it.
extension DeviceStore {
    /// KEYS: device, challenge, mad set, grace. ARGV: keyId, challenge ttl ms, mad limit (-1 =
    /// unlimited), grace ms, mad/grace key ttl seconds. Reply `{'ok', subject}` or `{refusal…}`.
    static let prepareAttestationScript = RedisScript(quotaAndChallengeFunction + """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local dev = redis.call('HMGET', KEYS[1], 'rev', 'subj')
        if dev[1] == '1' then return {'forbidden'} end
        local refusal = quota_and_challenge(now, ARGV[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]),
                                            tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
        if refusal then return refusal end
        return {'ok', dev[2] or ''}
        """)

    /// KEYS: device, mad set, subject (or the device key again when there is none). ARGV: keyId,
    /// pk (base64 X9.63), env, receipt (base64), subject id ('' = keep the recorded one), mad ttl.
    /// Reply `{'ok', subject, subscription, added, count}` or `{'forbidden'}`.
    static let commitAttestationScript = RedisScript("""
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local old = redis.call('HMGET', KEYS[1], 'rev', 'subj')
        if old[1] == '1' then return {'forbidden'} end
        local subject = ARGV[5]
        if subject == '' then subject = old[2] or '' end
        redis.call('DEL', KEYS[1])
        redis.call('HSET', KEYS[1], 'pk', ARGV[2], 'ctr', '0', 'rev', '0', 'env', ARGV[3], 'created', now, 'seen', now,
          'rcpt', ARGV[4])
        if subject ~= '' then redis.call('HSET', KEYS[1], 'subj', subject) end
        local added = redis.call('SADD', KEYS[2], ARGV[1])
        if added == 1 then redis.call('EXPIRE', KEYS[2], ARGV[6]) end
        local count = redis.call('SCARD', KEYS[2])
        local subscription = ''
        if subject ~= '' and KEYS[3] ~= KEYS[1] then subscription = redis.call('GET', KEYS[3]) or '' end
        return {'ok', subject, subscription, added, count}
        """)

    enum AttestationPrepareOutcome {
        case ready(knownSubjectID: String?)
        case refused(GatewayError)
    }

    func prepareAttestation(tenant: Tenant, keyID: String, challengeKey: String, month: String, challengeTTL: Duration,
                            madLimit: DeviceLimit, grace: Duration,
                            completion: @escaping (Result<AttestationPrepareOutcome, RedisError>) -> Void) {
        let limit: Int
        switch madLimit {
        case .limited(let value): limit = value
        case .unlimited: limit = -1
        }
        let keys = [Self.deviceKey(tenant, keyID), challengeKey, Self.madKey(tenant, month), Self.graceKey(tenant, month)]
        let args = [keyID, String(challengeTTL.milliseconds), String(limit), String(grace.milliseconds), String(Self.monthKeyTTL)]
        redis.evalScript(Self.prepareAttestationScript, keys: keys, args: args) { result in
            completion(result.flatMap { value in
                guard let parts = value.array?.map({ $0.string ?? "" }), let status = parts.first else {
                    return .failure(.server("unexpected reply from the attestation prepare script"))
                }
                switch status {
                case "ok":
                    let subject = parts.count > 1 ? parts[1] : ""
                    return .success(.ready(knownSubjectID: subject.isEmpty ? nil : subject))
                case "quota_exceeded" where parts.count == 3:
                    return .success(.refused(.quotaExceeded(limit: Int(parts[1]) ?? limit, current: Int(parts[2]) ?? 0)))
                case "forbidden", "challenge_invalid", "challenge_already_used", "challenge_expired":
                    return .success(.refused(RefreshError.error(for: status)))
                default:
                    return .failure(.server("unexpected reply from the attestation prepare script"))
                }
            })
        }
    }

    func commitAttestation(tenant: Tenant, keyID: String, month: String, publicKey: String, environment: String,
                           receipt: String, subjectID: String?, knownSubjectID: String?,
                           completion: @escaping (Result<CommitOutcome, RedisError>) -> Void) {
        let subjectKey = (subjectID ?? knownSubjectID).map { Self.subjectKey(tenant, $0) } ?? Self.deviceKey(tenant, keyID)
        redis.evalScript(Self.commitAttestationScript,
                         keys: [Self.deviceKey(tenant, keyID), Self.madKey(tenant, month), subjectKey],
                         args: [keyID, publicKey, environment, receipt, subjectID ?? "", String(Self.monthKeyTTL)]) { result in
            completion(CommitOutcome.parse(result, script: "attestation commit"))
        }
    }
}
