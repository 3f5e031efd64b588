import AGConfig
import AGPlatformSSO
import AGPolicy

@testable import AGGateway

/// An in-memory `PlatformSSOStore`: answers what the test scripted and records every call.
final class FakePlatformSSO: PlatformSSOStore {
    var nonceReply: Result<String, StoreFailure> = .success("harness-nonce")
    var prepareReply: Result<(RateLimitOutcome, PlatformSSOPrepared), StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var commitReply: Result<PlatformSSOCommitted, StoreFailure> = .failure(StoreFailure(description: "unscripted"))
    var records: [PlatformSSOKeyID: PlatformSSODeviceRecord] = [:]
    var mintReply: Result<PlatformSSOCommitted, StoreFailure> = .success(.rotated(expiresIn: 604_800))

    private(set) var noncesIssued = 0
    private(set) var prepared: [PlatformSSOPreparation] = []
    private(set) var committed: [PlatformSSOCommit] = []
    private(set) var registered: [PlatformSSODeviceRegistration] = []
    private(set) var minted: [PlatformSSOMint] = []
    private(set) var revoked: [PlatformSSOKeyID] = []
    private(set) var deleted: [PlatformSSOKeyID] = []

    func issueNonce(tenant: Tenant, ttl: Duration, completion: @escaping (Result<String, StoreFailure>) -> Void) {
        noncesIssued += 1
        completion(nonceReply)
    }

    func prepareRefresh(_ request: PlatformSSOPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, PlatformSSOPrepared), StoreFailure>) -> Void) {
        prepared.append(request)
        completion(prepareReply)
    }

    func commitRefresh(_ request: PlatformSSOCommit, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void) {
        committed.append(request)
        completion(commitReply)
    }

    func register(_ device: PlatformSSODeviceRegistration, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        registered.append(device)
        let created = records[device.keys.keyID] == nil
        records[device.keys.keyID] = PlatformSSODeviceRecord(keys: device.keys, user: device.user, disabled: false,
                                                             createdMilliseconds: nil, updatedMilliseconds: nil)
        completion(.success(created))
    }

    func read(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<PlatformSSODeviceRecord?, StoreFailure>) -> Void) {
        completion(.success(records[keyID]))
    }

    func delete(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        deleted.append(keyID)
        completion(.success(records.removeValue(forKey: keyID) != nil))
    }

    func revoke(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void) {
        revoked.append(keyID)
        completion(.success(records[keyID] != nil))
    }

    func mint(_ request: PlatformSSOMint, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void) {
        minted.append(request)
        completion(mintReply)
    }
}
