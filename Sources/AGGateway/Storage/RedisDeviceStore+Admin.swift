import AGFormats
import AGPolicy
import AGRedis

/// The admin API's device calls on Redis. A revocation or re-import changes the record (the
/// truth every proxied request checks; a revocation bumps the tenant's device epoch in the
/// same script, so every worker reads the record again within a lease lifetime), then appends
/// an event to the events stream for the instances' local revoked sets. The record lives in the tenant's cluster slot and the stream
/// in `{cfg}`'s, so these are two commands; an event lost between them (Redis failing at
/// that instant) only leaves an instance's fallback set behind, never a token admitted.
extension RedisDeviceStore: DeviceAdministration {
    func importKey(_ key: ImportedDeviceKey, completion: @escaping (Result<Void, StoreFailure>) -> Void) {
        let event = GatewayEvents.device("restore", appID: key.tenant.appID, keyID: key.keyID)
        let redis = self.redis
        redis.evalScript(DeviceScripts.importKey, keys: [Self.deviceKey(key.tenant, key.keyID)],
                         args: [String(time.nowMicroseconds), Base64.encode(key.publicKey), String(key.counter),
                                key.environment]) { result in
            if case .success = result { redis.send(GatewayEvents.append(event)) { _ in } }
            completion(Self.store(result).map { _ in () })
        }
    }

    func read(tenant: Tenant, keyID: String, completion: @escaping (Result<DeviceRecord?, StoreFailure>) -> Void) {
        redis.send(["HGETALL", Self.deviceKey(tenant, keyID)]) { result in
            completion(Self.store(result).map { value in
                guard let fields = value.hashFields, let pk = fields["pk"] else { return nil }
                return DeviceRecord(publicKey: pk, counter: Int(fields["ctr"] ?? "0") ?? 0, revoked: fields["rev"] == "1",
                                    environment: fields["env"], subjectID: fields["subj"],
                                    createdMilliseconds: fields["created"].flatMap { Int64($0) },
                                    lastSeenMilliseconds: fields["seen"].flatMap { Int64($0) })
            })
        }
    }

    func revoke(tenant: Tenant, keyID: String, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        let event = GatewayEvents.device("revoke", appID: tenant.appID, keyID: keyID)
        let redis = self.redis
        redis.evalScript(DeviceScripts.revoke, keys: [Self.deviceKey(tenant, keyID), tenant.deviceEpochKey],
                         args: [String(time.nowMicroseconds), DeviceEpoch.seed()]) { result in
            if case .success(let reply) = result, reply.int == 1 { redis.send(GatewayEvents.append(event)) { _ in } }
            completion(Self.store(result).map { $0.int == 1 })
        }
    }

    func setSubscription(tenant: Tenant, subjectID: String, json: String, completion: @escaping (Result<Void, StoreFailure>) -> Void) {
        redis.send(["SET", Self.subjectKey(tenant, subjectID), json]) { result in
            completion(Self.store(result).map { _ in () })
        }
    }

    func usage(tenant: Tenant, completion: @escaping (Result<DeviceUsage, StoreFailure>) -> Void) {
        let month = time.nowUTC.monthKey
        let redis = self.redis
        redis.send(["SCARD", Self.madKey(tenant, month)]) { result in
            switch Self.store(result) {
            case .failure(let failure):
                completion(.failure(failure))
            case .success(let count):
                redis.send(["GET", Self.graceKey(tenant, month)]) { result in
                    completion(Self.store(result).map { grace in
                        DeviceUsage(month: month, activeDevices: Int(count.int ?? 0),
                                    graceStartedMilliseconds: grace.string.flatMap { Int64($0) })
                    })
                }
            }
        }
    }
}
