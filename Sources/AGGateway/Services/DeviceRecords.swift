import AGConfig
import AGPolicy

/// The attestation routes' two atomic steps each (DESIGN section 10), as handlers see them.
/// `RedisDeviceStore` runs them as Lua scripts; the router harness fakes them in memory.
///
/// Implementations read "now" (and the month it falls in) from their `TimeSource` once per call.
protocol DeviceRecords: AnyObject {
    /// Refresh, before the signature check: the tenant `attest` bucket, device, quota, challenge.
    func prepareRefresh(_ request: RefreshPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, RefreshPrepared), StoreFailure>) -> Void)
    /// Refresh, after the signature check: counter compare-and-set, subject, month count.
    func commitRefresh(_ request: RefreshCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void)
    /// Drops the stored attestation (the device must attest again) after its own key signed a
    /// refused assertion; only while the record still holds `publicKey` and `counter` (the
    /// stored counter the assertion was judged against) and is not revoked. Completes with
    /// whether it was deleted.
    func invalidate(tenant: Tenant, keyID: String, publicKey: [UInt8], counter: UInt32,
                    completion: @escaping (Result<Bool, StoreFailure>) -> Void)
    /// Validate, before the attestation check: revocation, quota, challenge.
    func prepareAttestation(_ request: AttestationPreparation,
                            completion: @escaping (Result<AttestationPrepared, StoreFailure>) -> Void)
    /// Validate, after the attestation check: stores the key with counter 0.
    func commitAttestation(_ request: AttestationCommit, completion: @escaping (Result<CommitOutcome, StoreFailure>) -> Void)
}

/// What the refresh's first step needs.
struct RefreshPreparation {
    let tenant: Tenant
    let keyID: String
    let challenge: String
    let challengeTTL: Duration
    let madLimit: DeviceLimit
    let grace: Duration
    /// The tenant `attest` bucket, taken in the same round trip.
    let bucket: BucketCheck
}

/// The refresh's first step passed: the stored key, counter and subject link.
enum RefreshPrepared: Equatable {
    case ready(publicKey: [UInt8], counter: UInt32, subjectID: String?)
    case refused(DeviceRefusal)
}

/// What the refresh's second step needs.
struct RefreshCommit {
    let tenant: Tenant
    let keyID: String
    let expectedCounter: UInt32
    let newCounter: UInt32
    /// A new subject link; nil keeps `knownSubjectID`.
    let subjectID: String?
    let knownSubjectID: String?
}

/// What validate's first step needs.
struct AttestationPreparation {
    let tenant: Tenant
    let keyID: String
    let challenge: String
    let challengeTTL: Duration
    let madLimit: DeviceLimit
    let grace: Duration
}

enum AttestationPrepared: Equatable {
    case ready(knownSubjectID: String?)
    case refused(DeviceRefusal)
}

/// What validate's second step needs.
struct AttestationCommit {
    let tenant: Tenant
    let keyID: String
    /// 65-byte X9.63.
    let publicKey: [UInt8]
    let environment: String
    let receipt: [UInt8]
    let subjectID: String?
    let knownSubjectID: String?
}

/// A commit step's answer.
enum CommitOutcome: Equatable {
    case committed(subjectID: String?, subscription: String?, newlyCounted: Bool, monthlyCount: Int)
    case refused(DeviceRefusal)
}

/// The admin API's device, subject and usage calls (DESIGN section 8).
protocol DeviceAdministration: AnyObject {
    func importKey(_ key: ImportedDeviceKey, completion: @escaping (Result<Void, StoreFailure>) -> Void)
    /// The record, or nil when there is none.
    func read(tenant: Tenant, keyID: String, completion: @escaping (Result<DeviceRecord?, StoreFailure>) -> Void)
    /// Completes with false when there is no such device.
    func revoke(tenant: Tenant, keyID: String, completion: @escaping (Result<Bool, StoreFailure>) -> Void)
    func setSubscription(tenant: Tenant, subjectID: String, json: String, completion: @escaping (Result<Void, StoreFailure>) -> Void)
    /// This month's monthly-active-device count and grace start.
    func usage(tenant: Tenant, completion: @escaping (Result<DeviceUsage, StoreFailure>) -> Void)
}

/// A device key imported through the admin API.
struct ImportedDeviceKey {
    let tenant: Tenant
    let keyID: String
    let publicKey: [UInt8]
    let counter: UInt32
    let environment: String
}

/// A stored device, without anything secret.
struct DeviceRecord: Equatable {
    let publicKey: String
    let counter: Int
    let revoked: Bool
    let environment: String?
    let subjectID: String?
    let createdMilliseconds: Int64?
    let lastSeenMilliseconds: Int64?
}

/// A tenant's monthly active devices.
struct DeviceUsage: Equatable {
    /// `YYYYMM` of the month counted.
    let month: String
    let activeDevices: Int
    let graceStartedMilliseconds: Int64?

    /// The month as the admin API shows it: `YYYY-MM`.
    var shownMonth: String { String(month.prefix(4)) + "-" + String(month.suffix(2)) }
}
