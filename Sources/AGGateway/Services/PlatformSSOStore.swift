import AGConfig
import AGPlatformSSO
import AGPolicy

/// Platform SSO state (DESIGN section 11) as handlers see it: server nonces, the refresh's two
/// atomic steps, and the admin API's device and family calls. `RedisPlatformSSOStore` runs them
/// as Lua scripts; the router harness can fake them in memory.
///
/// Implementations read "now" from their `TimeSource` once per call. Completions run once, on
/// the loop thread.
protocol PlatformSSOStore: AnyObject {
    /// Issues a single-use server nonce valid for `ttl`.
    func issueNonce(tenant: Tenant, ttl: Duration, completion: @escaping (Result<String, StoreFailure>) -> Void)
    /// Refresh, before the signature check: the tenant `attest` bucket and the device record.
    func prepareRefresh(_ request: PlatformSSOPreparation,
                        completion: @escaping (Result<(RateLimitOutcome, PlatformSSOPrepared), StoreFailure>) -> Void)
    /// Refresh, after every check passed: spends the nonce, then checks and rotates the token.
    func commitRefresh(_ request: PlatformSSOCommit, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void)

    /// Stores a device (admin `PUT`); completes with true when it was new.
    func register(_ device: PlatformSSODeviceRegistration, completion: @escaping (Result<Bool, StoreFailure>) -> Void)
    /// The device record, or nil when there is none.
    func read(tenant: Tenant, keyID: PlatformSSOKeyID,
              completion: @escaping (Result<PlatformSSODeviceRecord?, StoreFailure>) -> Void)
    /// Deletes the device record (its families can never be used again); false when there was none.
    func delete(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void)
    /// Disables the device and ends every family of it; false when there is no such device.
    func revoke(tenant: Tenant, keyID: PlatformSSOKeyID, completion: @escaping (Result<Bool, StoreFailure>) -> Void)
    /// Starts a new family with `token` as its first token.
    func mint(_ request: PlatformSSOMint, completion: @escaping (Result<PlatformSSOCommitted, StoreFailure>) -> Void)
}

/// What the refresh's first step needs.
struct PlatformSSOPreparation {
    let tenant: Tenant
    let keyID: PlatformSSOKeyID
    /// The tenant `attest` bucket, taken in the same round trip.
    let bucket: BucketCheck
}

/// The refresh's first step: the device's keys and user, or why there is none to use.
enum PlatformSSOPrepared: Equatable {
    case ready(PlatformSSODeviceKeys, user: PlatformSSOUser)
    case refused(PlatformSSORefusal)
}

/// What the refresh's second step needs.
struct PlatformSSOCommit {
    let tenant: Tenant
    let keyID: PlatformSSOKeyID
    let serverNonce: String
    let nonceTTL: Duration
    /// The token presented, or nil when it does not even have the shape of one the gateway
    /// mints (the nonce is still spent first; the token then reads as unknown).
    let presented: PlatformSSORefreshToken?
    /// The token that replaces it.
    let successor: PlatformSSORefreshToken
    let familyTTL: Duration
    let idle: Duration
    let reuseGrace: Duration
}

/// A token minted or rotated, or why not.
enum PlatformSSOCommitted: Equatable {
    /// `expiresIn`: seconds until the family ends unless used again (`refresh_token_expires_in`).
    case rotated(expiresIn: Int64)
    case refused(PlatformSSORefusal)
}

/// A device registered through the admin API.
struct PlatformSSODeviceRegistration {
    let tenant: Tenant
    let keys: PlatformSSODeviceKeys
    let user: PlatformSSOUser
}

/// A stored device, as the admin API shows it.
struct PlatformSSODeviceRecord: Equatable {
    let keys: PlatformSSODeviceKeys
    let user: PlatformSSOUser
    let disabled: Bool
    let createdMilliseconds: Int64?
    let updatedMilliseconds: Int64?
}

/// What minting a first refresh token needs.
struct PlatformSSOMint {
    let tenant: Tenant
    let keyID: PlatformSSOKeyID
    let token: PlatformSSORefreshToken
    let familyTTL: Duration
    let idle: Duration
}
