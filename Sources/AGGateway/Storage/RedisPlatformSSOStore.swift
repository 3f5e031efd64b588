import AGConfig
import AGCrypto
import AGFormats
import AGPlatformSSO
import AGPolicy
import AGRedis

/// Platform SSO state in Redis with the scripts of `PlatformSSOScripts` (keys and fields are
/// documented there). Every call reads now once from `time` and passes it to its script; a
/// refresh costs two round trips, `prepareRefresh` and `commitRefresh`. Loop thread only.
final class RedisPlatformSSOStore: PlatformSSOStore {
    let redis: RedisClient
    let time: any TimeSource
    /// Nonces, drawn from the worker's block of OpenSSL's DRBG.
    let random: SecureRandomBuffer
    /// Parsed device keys by their stored text (`sk|ek`): importing a point into OpenSSL costs
    /// about as much as an ECDH, twice per refresh otherwise. Keyed by the key material itself,
    /// so a re-registered device with other keys misses and is parsed afresh.
    private var parsedKeys = LRUCache<String, PlatformSSODeviceKeys>(capacity: 4_096)
    /// The server's clock (µs) as the last prepare script of each tenant read it, and when its
    /// reply arrived: every commit follows its own prepare on this worker, so its tenant's
    /// reading is at most that old — and from the server that holds the tenant's keys (in a
    /// cluster, each tenant's shard: one tenant's reading never dates another's commit).
    private var serverClocks: [String: (microseconds: Int64, readAt: ContinuousClock.Instant)] = [:]

    /// `redis.wait_replicas` / `redis.wait_timeout`, as for the App Attest commits: a rotation (and
    /// a minted family) must reach this many replicas before the answer, or a failover to one of
    /// them loses it and the Mac, holding a token the new primary never saw, must log in again.
    let confirmation: (replicas: Int, within: Duration)

    init(redis: RedisClient, time: any TimeSource, random: SecureRandomBuffer, waitReplicas: Int = 0,
         waitTimeout: Duration = .zero) {
        self.redis = redis
        self.time = time
        self.random = random
        confirmation = (waitReplicas, waitTimeout)
    }

    static func deviceKey(_ tenant: Tenant, _ keyID: PlatformSSOKeyID) -> String {
        tenant.recordKeys.platformSSODevice + keyID.urlSafe
    }
    static func nonceKey(_ tenant: Tenant, _ nonce: String) -> String { tenant.recordKeys.platformSSONonce + nonce }
    static func familyKey(_ tenant: Tenant, _ family: String) -> String { tenant.recordKeys.platformSSOFamily + family }
    static func tokenKey(_ tenant: Tenant, _ digest: String) -> String { tenant.recordKeys.platformSSOToken + digest }

    /// A new server nonce: 32 bytes from OpenSSL's DRBG, base64url (43 characters).
    func newNonce() -> String { Base64.encodeURL(random.bytes(count: 32)) }

    /// A new device epoch: 16 random bytes, base64url.
    static func newEpoch() -> String { Base64.encodeURL(SecureRandom.bytes(count: 16)) }

    func issueNonce(tenant: Tenant, ttl: Duration, completion: @escaping (Result<String, StoreFailure>) -> Void) {
        let nonce = newNonce()
        redis.evalScript(PlatformSSOScripts.issueNonce, keys: [Self.nonceKey(tenant, nonce)],
                         args: [String(time.nowMicroseconds), String(ttl.milliseconds * 2)]) { result in
            completion(RedisDeviceStore.store(result).flatMap { value in
                guard let issuedAt = value.int, issuedAt > 0 else { return .failure(StoreFailure(description: "nonce collision")) }
                return .success(nonce)
            })
        }
    }

    func prepareRefresh(_ request: PlatformSSOPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, PlatformSSOPrepared), StoreFailure>) -> Void) {
        let bucket = request.bucket
        redis.evalScript(PlatformSSOScripts.prepareRefresh, keys: [Self.deviceKey(request.tenant, request.keyID), bucket.key],
                         args: [String(time.nowMicroseconds), String(bucket.limitPerMinute)]) { [self] result in
            completion(RedisDeviceStore.store(result).flatMap { value in
                guard let reply = value.array, reply.count == 4,
                      let decided = RateLimitScript.decisions(from: reply[0], limits: [bucket.limitPerMinute]),
                      let parts = reply[1].array?.map({ $0.string ?? "" }), let status = parts.first,
                      let seconds = reply[2].int, let microseconds = reply[3].int else {
                    return .failure(StoreFailure(description: "unexpected reply from the Platform SSO prepare script"))
                }
                serverClocks[request.tenant.appID] = (seconds * 1_000_000 + microseconds, .now)
                let rateLimit = RateLimitOutcome.combining([bucket], allowed: decided.allowed, decided.decisions)
                guard status == "ok" else {
                    guard let refusal = PlatformSSORefusal(rawValue: status) else {
                        return .failure(StoreFailure(description: "unexpected refusal from the Platform SSO prepare script"))
                    }
                    return .success((rateLimit, .refused(refusal)))
                }
                guard parts.count == 5, let keys = deviceKeys(parts[1], parts[2]),
                      let user = Self.user(parts[3], parts[4]) else {
                    return .failure(StoreFailure(description: "corrupt Platform SSO device record"))
                }
                return .success((rateLimit, .ready(keys, user: user)))
            })
        }
    }

    func commitRefresh(_ request: PlatformSSOCommit, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void) {
        let tenant = request.tenant
        // A token of the wrong shape names keys that never exist: the script still spends the
        // nonce first, then finds no token.
        let family = request.presented?.familyID ?? ""
        let keys = [Self.nonceKey(tenant, request.serverNonce), Self.deviceKey(tenant, request.keyID),
                    Self.tokenKey(tenant, request.presented?.digest ?? "-"), Self.familyKey(tenant, family.isEmpty ? "-" : family),
                    Self.tokenKey(tenant, request.successor.digest)]
        let args = [String(time.nowMicroseconds), String(request.nonceTTL.milliseconds), request.keyID.urlSafe, family,
                    request.presented?.digest ?? "-", request.successor.digest, String(request.familyTTL.milliseconds),
                    String(request.idle.milliseconds), String(request.reuseGrace.milliseconds), commitDeadline(tenant)]
        redis.evalScript(PlatformSSOScripts.commitRefresh, keys: keys, args: args, confirmedBy: confirmation.replicas,
                         within: confirmation.within) { [self] result in
            if case .failure = result, let presented = request.presented {
                // The script may have rotated on the primary all the same (replicas that did not
                // confirm it, a connection lost after it ran): take that back.
                redis.evalScript(PlatformSSOScripts.undoRotation, keys: [keys[3], keys[4]],
                                 args: [String(time.nowMicroseconds), presented.digest, request.successor.digest]) { _ in }
            }
            completion(Self.committed(result, script: "refresh commit"))
        }
    }

    /// The latest server time (µs, the server's clock) at which the commit may still run: a
    /// quarter of the command timeout before this gateway gives up on its reply. Dated from the
    /// server's clock at the prepare plus the time elapsed here since its reply, which can only
    /// come out early (the reply's own travel is not counted), so no clock of this host is
    /// compared with the server's. Empty (no deadline) before any prepare of the tenant answered.
    private func commitDeadline(_ tenant: Tenant) -> String {
        guard let serverClock = serverClocks[tenant.appID] else { return "" }
        let timeout = redis.timeout.microseconds
        let elapsed = serverClock.readAt.duration(to: .now).microseconds
        return String(serverClock.microseconds + elapsed + timeout - timeout / 4)
    }

    func register(_ device: PlatformSSODeviceRegistration, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        let args = [String(time.nowMicroseconds), Base64.encode(device.keys.signingKey.x963Representation),
                    Base64.encode(device.keys.encryptionKey.x963Representation), device.user.subject,
                    JSONValue.object(device.user.claims).serializedString(), Self.newEpoch()]
        redis.evalScript(PlatformSSOScripts.registerDevice, keys: [Self.deviceKey(device.tenant, device.keys.keyID)],
                         args: args) { result in
            completion(RedisDeviceStore.store(result).flatMap { value in
                switch value.string {
                case "created": .success(true)
                case "updated": .success(false)
                default: .failure(StoreFailure(description: "unexpected reply from the Platform SSO register script"))
                }
            })
        }
    }

    func read(tenant: Tenant, keyID: PlatformSSOKeyID,
              completion: @escaping (Result<PlatformSSODeviceRecord?, StoreFailure>) -> Void) {
        redis.send(["HGETALL", Self.deviceKey(tenant, keyID)]) { [self] result in
            completion(RedisDeviceStore.store(result).flatMap { value in
                guard let fields = value.hashFields, !fields.isEmpty else { return .success(nil) }
                guard let keys = deviceKeys(fields["sk"] ?? "", fields["ek"] ?? ""),
                      let user = Self.user(fields["sub"] ?? "", fields["claims"] ?? "{}") else {
                    return .failure(StoreFailure(description: "corrupt Platform SSO device record"))
                }
                return .success(PlatformSSODeviceRecord(keys: keys, user: user, disabled: fields["rev"] == "1",
                                                        createdMilliseconds: fields["created"].flatMap { Int64($0) },
                                                        updatedMilliseconds: fields["updated"].flatMap { Int64($0) }))
            })
        }
    }

    func delete(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        redis.send(["DEL", Self.deviceKey(tenant, keyID)]) { result in
            completion(RedisDeviceStore.store(result).map { $0.int == 1 })
        }
    }

    func revoke(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        redis.evalScript(PlatformSSOScripts.revokeDevice, keys: [Self.deviceKey(tenant, keyID)],
                         args: [String(time.nowMicroseconds), Self.newEpoch()]) { result in
            completion(RedisDeviceStore.store(result).map { $0.int == 1 })
        }
    }

    func mint(_ request: PlatformSSOMint, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void) {
        let tenant = request.tenant
        let keys = [Self.deviceKey(tenant, request.keyID), Self.familyKey(tenant, request.token.familyID),
                    Self.tokenKey(tenant, request.token.digest)]
        let args = [String(time.nowMicroseconds), request.keyID.urlSafe, request.token.familyID, request.token.digest,
                    String(request.familyTTL.milliseconds), String(request.idle.milliseconds)]
        redis.evalScript(PlatformSSOScripts.mintRefreshToken, keys: keys, args: args, confirmedBy: confirmation.replicas,
                         within: confirmation.within) { result in
            completion(Self.committed(result, script: "mint"))
        }
    }

    /// `{'ok', seconds}` or `{refusal}`.
    private static func committed(_ result: Result<RedisValue, RedisError>, script: String) -> Result<PlatformSSOCommitted, StoreFailure> {
        RedisDeviceStore.store(result).flatMap { value in
            guard let parts = value.array?.map({ $0.string ?? "" }), let status = parts.first else {
                return .failure(StoreFailure(description: "unexpected reply from the Platform SSO \(script) script"))
            }
            if status == "ok", parts.count == 2, let seconds = Int64(parts[1]) { return .success(.rotated(expiresIn: seconds)) }
            if status == "late" {
                return .failure(StoreFailure(description: "the Platform SSO \(script) reached Redis after its deadline; nothing changed"))
            }
            guard let refusal = PlatformSSORefusal(rawValue: status) else {
                return .failure(StoreFailure(description: "unexpected reply from the Platform SSO \(script) script: \(status)"))
            }
            return .success(.refused(refusal))
        }
    }

    private func deviceKeys(_ signing: String, _ encryption: String) -> PlatformSSODeviceKeys? {
        let cacheKey = signing + "|" + encryption
        if let cached = parsedKeys.value(for: cacheKey) { return cached }
        guard let sk = Base64.decode(signing), let ek = Base64.decode(encryption),
              let signingKey = try? P256.PublicKey(x963Representation: sk),
              let encryptionKey = try? P256.PublicKey(x963Representation: ek) else { return nil }
        let keys = PlatformSSODeviceKeys(signingKey: signingKey, encryptionKey: encryptionKey)
        parsedKeys.set(keys, for: cacheKey)
        return keys
    }

    private static func user(_ subject: String, _ claims: String) -> PlatformSSOUser? {
        guard case .object(let members)? = try? JSONValue(parsing: Array(claims.utf8)) else { return nil }
        return try? PlatformSSOUser(subject: subject, claims: members)
    }
}
