import AGConfig
import AGFormats
import AGPolicy
import AGRedis

/// Device records and the attestation routes' atomic steps in Redis (DESIGN section 10), with
/// the scripts of `DeviceScripts`. Every call reads now once from `time` and passes it to its
/// script; the month of the monthly-active-device counters comes from the same reading.
///
/// Keys (every one under the tenant's hash tag, so each script touches one slot):
/// `ag:{APPID}:dev:<keyId>`, `ag:{APPID}:mad:<YYYYMM>`, `ag:{APPID}:grace:<YYYYMM>`,
/// `ag:{APPID}:subj:<subjectId>`, `ag:{APPID}:ch:<challenge>`. Loop thread only.
final class RedisDeviceStore: DeviceRecords {
    let redis: RedisClient
    let time: any TimeSource
    /// `redis.wait_replicas` / `redis.wait_timeout`: the commit scripts' writes (and, since a
    /// replica acknowledges a replication offset, everything this connection wrote before them,
    /// the spent challenge included) must reach this many replicas before the answer.
    let confirmation: (replicas: Int, within: Duration)

    init(redis: RedisClient, time: any TimeSource, waitReplicas: Int = 0, waitTimeout: Duration = .zero) {
        self.redis = redis
        self.time = time
        confirmation = (waitReplicas, waitTimeout)
    }

    /// Month keys outlive their month by a few days so usage can still be read.
    static let monthKeyTTL = 40 * 86_400

    static func deviceKey(_ tenant: Tenant, _ keyID: String) -> String { tenant.recordKeys.device + keyID }
    static func madKey(_ tenant: Tenant, _ month: String) -> String { tenant.recordKeys.monthlyActive + month }
    static func graceKey(_ tenant: Tenant, _ month: String) -> String { tenant.recordKeys.grace + month }
    static func subjectKey(_ tenant: Tenant, _ subjectID: String) -> String { tenant.recordKeys.subject + subjectID }
    static func challengeKey(_ tenant: Tenant, _ challenge: String) -> String { tenant.recordKeys.challenge + challenge }

    /// Keys and arguments the two prepare scripts share: device, challenge, month set, grace;
    /// now, keyId, challenge ttl, mad limit, grace, month key ttl.
    /// `extraKey` / `extraArgument` follow (the refresh's bucket), so the arrays are built once.
    private func quotaAndChallenge(tenant: Tenant, keyID: String, challenge: String, challengeTTL: Duration,
                                   madLimit: DeviceLimit, grace: Duration, extraKey: String? = nil,
                                   extraArgument: String? = nil) -> (keys: [String], args: [String]) {
        let now = time.nowMicroseconds
        let month = UTCDateTime(unixMilliseconds: now / 1000).monthKey
        var keys = [String]()
        keys.reserveCapacity(5)
        keys.append(Self.deviceKey(tenant, keyID))
        keys.append(Self.challengeKey(tenant, challenge))
        keys.append(Self.madKey(tenant, month))
        keys.append(Self.graceKey(tenant, month))
        if let extraKey { keys.append(extraKey) }
        var args = [String]()
        args.reserveCapacity(7)
        args.append(String(now))
        args.append(keyID)
        args.append(String(challengeTTL.milliseconds))
        args.append(madLimit.scriptArgument)
        args.append(String(grace.milliseconds))
        args.append(String(Self.monthKeyTTL))
        if let extraArgument { args.append(extraArgument) }
        return (keys, args)
    }

    func prepareRefresh(_ request: RefreshPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, RefreshPrepared), StoreFailure>) -> Void) {
        let bucket = request.bucket
        let (keys, args) = quotaAndChallenge(tenant: request.tenant, keyID: request.keyID, challenge: request.challenge,
                                             challengeTTL: request.challengeTTL, madLimit: request.madLimit, grace: request.grace,
                                             extraKey: bucket.key, extraArgument: String(bucket.limitPerMinute))
        redis.evalScript(DeviceScripts.prepareRefresh, keys: keys, args: args) { result in
            completion(Self.store(result).flatMap { value in
                guard let reply = value.array, reply.count == 2,
                      let decided = RateLimitScript.decisions(from: reply[0], limits: [bucket.limitPerMinute]),
                      let outcome = reply[1].array else {
                    return .failure(StoreFailure(description: "unexpected reply from the refresh prepare script"))
                }
                let rateLimit = RateLimitOutcome.combining([bucket], allowed: decided.allowed, decided.decisions)
                guard outcome.first?.string == "ok" else {
                    guard let refusal = DeviceRefusal(reply: outcome.map { $0.string ?? "" }) else {
                        return .failure(StoreFailure(description: "unexpected refusal from the refresh prepare script"))
                    }
                    return .success((rateLimit, .refused(refusal)))
                }
                // The key is decoded from the reply's bytes (no String of its base64 on the way).
                guard outcome.count == 4, let counter = outcome[2].string.flatMap({ UInt32($0) }),
                      let key = outcome[1].bytes.flatMap({ Base64.decode(utf8: $0) }), let subject = outcome[3].string else {
                    return .failure(StoreFailure(description: "corrupt device record"))
                }
                return .success((rateLimit, .ready(publicKey: key, counter: counter, subjectID: subject.isEmpty ? nil : subject)))
            })
        }
    }

    func commitRefresh(_ request: RefreshCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void) {
        let now = time.nowMicroseconds
        let month = UTCDateTime(unixMilliseconds: now / 1000).monthKey
        let tenant = request.tenant
        let deviceKey = Self.deviceKey(tenant, request.keyID)
        let subjectKey = (request.subjectID ?? request.knownSubjectID).map { Self.subjectKey(tenant, $0) } ?? deviceKey
        redis.evalScript(DeviceScripts.commitRefresh, keys: [deviceKey, Self.madKey(tenant, month), subjectKey],
                         args: [String(now), request.keyID, String(request.expectedCounter), String(request.newCounter),
                                request.subjectID ?? "", String(Self.monthKeyTTL)],
                         confirmedBy: confirmation.replicas, within: confirmation.within) { result in
            completion(Self.commitOutcome(result, script: "refresh commit"))
        }
    }

    func invalidate(tenant: Tenant, keyID: String, publicKey: [UInt8], counter: UInt32,
                    completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        redis.evalScript(DeviceScripts.invalidate, keys: [Self.deviceKey(tenant, keyID), tenant.deviceEpochKey],
                         args: [String(time.nowMicroseconds), Base64.encode(publicKey), DeviceEpoch.seed(), String(counter)]) { result in
            completion(Self.store(result).flatMap { value in
                guard let deleted = value.int else {
                    return .failure(StoreFailure(description: "unexpected reply from the invalidate script"))
                }
                return .success(deleted == 1)
            })
        }
    }

    func prepareAttestation(_ request: AttestationPreparation,
                            completion: @escaping (Result<AttestationPrepared, StoreFailure>) -> Void) {
        let (keys, args) = quotaAndChallenge(tenant: request.tenant, keyID: request.keyID, challenge: request.challenge,
                                             challengeTTL: request.challengeTTL, madLimit: request.madLimit, grace: request.grace)
        redis.evalScript(DeviceScripts.prepareAttestation, keys: keys, args: args) { result in
            completion(Self.store(result).flatMap { value in
                guard let parts = value.array?.map({ $0.string ?? "" }), let status = parts.first else {
                    return .failure(StoreFailure(description: "unexpected reply from the attestation prepare script"))
                }
                if status == "ok" {
                    let subject = parts.count > 1 ? parts[1] : ""
                    return .success(.ready(knownSubjectID: subject.isEmpty ? nil : subject))
                }
                guard let refusal = DeviceRefusal(reply: parts) else {
                    return .failure(StoreFailure(description: "unexpected refusal from the attestation prepare script"))
                }
                return .success(.refused(refusal))
            })
        }
    }

    func commitAttestation(_ request: AttestationCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void) {
        let now = time.nowMicroseconds
        let month = UTCDateTime(unixMilliseconds: now / 1000).monthKey
        let tenant = request.tenant
        let deviceKey = Self.deviceKey(tenant, request.keyID)
        let subjectKey = (request.subjectID ?? request.knownSubjectID).map { Self.subjectKey(tenant, $0) } ?? deviceKey
        redis.evalScript(DeviceScripts.commitAttestation, keys: [deviceKey, Self.madKey(tenant, month), subjectKey],
                         args: [String(now), request.keyID, Base64.encode(request.publicKey), request.environment,
                                Base64.encode(request.receipt), request.subjectID ?? "", String(Self.monthKeyTTL)],
                         confirmedBy: confirmation.replicas, within: confirmation.within) { result in
            completion(Self.commitOutcome(result, script: "attestation commit"))
        }
    }

    /// A commit script's reply: `{'ok', subject, subscription, newlyCounted, count}` or `{refusal}`.
    static func commitOutcome(_ reply: Result<RedisValue, RedisError>, script: String) -> Result<CommitOutcome, StoreFailure> {
        store(reply).flatMap { value in
            guard let array = value.array, let status = array.first?.string else {
                return .failure(StoreFailure(description: "unexpected reply from the \(script) script"))
            }
            guard status == "ok" else {
                guard let refusal = DeviceRefusal(reply: array.map { $0.string ?? "" }) else {
                    return .failure(StoreFailure(description: "unexpected refusal from the \(script) script"))
                }
                return .success(.refused(refusal))
            }
            guard array.count == 5 else { return .failure(StoreFailure(description: "unexpected reply from the \(script) script")) }
            let subject = array[1].string ?? ""
            let subscription = array[2].string ?? ""
            return .success(.committed(subjectID: subject.isEmpty ? nil : subject,
                                       subscription: subscription.isEmpty ? nil : subscription,
                                       newlyCounted: array[3].int == 1, monthlyCount: Int(array[4].int ?? 0)))
        }
    }

    /// A Redis failure as the handlers see it.
    static func store<T>(_ result: Result<T, RedisError>) -> Result<T, StoreFailure> {
        result.mapError { StoreFailure(description: $0.description) }
    }
}
