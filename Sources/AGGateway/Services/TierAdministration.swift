import AGConfig
import AGRedis

/// Tier reads for every limited request and the admin API's runtime tier changes.
protocol TierAdministration: AnyObject {
    /// The tier a tenant's requests are limited by now (file tier or runtime override).
    func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier
    /// `effectiveTier` for a request: `tenant` of `snapshot` (what a worker may remember).
    func effectiveTier(for tenant: Tenant, in snapshot: GatewaySnapshot) -> RateTier
    func tenantTierOverride(appID: String) -> String?
    func effectiveTiers(fileTiers: [String: RateTier]) -> [String: RateTier]
    func setTenantTier(appID: String, tier: String, fileTiers: [String: RateTier],
                       completion: @escaping (Result<Void, TierChangeError>) -> Void)
    func clearTenantTier(appID: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void)
    func setTier(name: String, numbers: TierNumbers, fileTiers: [String: RateTier],
                 completion: @escaping (Result<RateTier, TierChangeError>) -> Void)
    func clearTier(name: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void)
    func runtimeNumbers(tier name: String) -> TierNumbers?
    /// Runtime numbers whose tier no longer exists (`TierStore.runtimeNumbersWithoutTier`).
    func runtimeNumbersWithoutTier(fileTiers: [String: RateTier]) -> [String: TierNumbers]
}

extension TierAdministration {
    func effectiveTier(for tenant: Tenant, in snapshot: GatewaySnapshot) -> RateTier {
        effectiveTier(appID: tenant.appID, fileTier: tenant.config.tier, fileTiers: snapshot.gateway.tiers)
    }
}

/// The instance's `TierStore`, with its changes written through one worker's Redis connection.
/// Per worker, loop thread only: its memo answers a request's tier without the store's lock.
final class RedisTierAdministration: TierAdministration {
    private let store: TierStore
    private let redis: RedisClient
    private let memo = TierMemo<Tenant, GatewaySnapshot>()

    init(store: TierStore, redis: RedisClient) {
        self.store = store
        self.redis = redis
    }

    func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier {
        store.effectiveTier(appID: appID, fileTier: fileTier, fileTiers: fileTiers)
    }

    func effectiveTier(for tenant: Tenant, in snapshot: GatewaySnapshot) -> RateTier {
        memo.tier(for: tenant, in: snapshot, version: store.version) {
            store.effectiveTier(appID: tenant.appID, fileTier: tenant.config.tier, fileTiers: snapshot.gateway.tiers)
        }
    }

    func tenantTierOverride(appID: String) -> String? {
        store.tenantTierOverride(appID: appID)
    }

    func effectiveTiers(fileTiers: [String: RateTier]) -> [String: RateTier] {
        store.effectiveTiers(fileTiers: fileTiers)
    }

    func setTenantTier(appID: String, tier: String, fileTiers: [String: RateTier],
                       completion: @escaping (Result<Void, TierChangeError>) -> Void) {
        store.setTenantTier(appID: appID, tier: tier, fileTiers: fileTiers, redis: redis, completion: completion)
    }

    func clearTenantTier(appID: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        store.clearTenantTier(appID: appID, redis: redis, completion: completion)
    }

    func setTier(name: String, numbers: TierNumbers, fileTiers: [String: RateTier],
                 completion: @escaping (Result<RateTier, TierChangeError>) -> Void) {
        store.setTier(name: name, numbers: numbers, fileTiers: fileTiers, redis: redis, completion: completion)
    }

    func clearTier(name: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        store.clearTier(name: name, redis: redis, completion: completion)
    }

    func runtimeNumbers(tier name: String) -> TierNumbers? {
        store.runtimeNumbers(tier: name)
    }

    func runtimeNumbersWithoutTier(fileTiers: [String: RateTier]) -> [String: TierNumbers] {
        store.runtimeNumbersWithoutTier(fileTiers: fileTiers)
    }
}

/// One worker's effective tiers, remembered per tenant while the snapshot and the overrides'
/// version stay the same: a proxied request then finds its tier with one identity lookup,
/// not the shared store's lock and three string-keyed dictionary lookups. Each entry keeps its
/// tenant (and the memo its snapshot) alive, so an identifier is never reused while
/// remembered. Bounded by the snapshot's tenants. Loop thread only.
final class TierMemo<Key: AnyObject, Owner: AnyObject> {
    private var owner: Owner?
    private var version: UInt64 = 0
    private var tiers: [ObjectIdentifier: (key: Key, tier: RateTier)] = [:]

    func tier(for key: Key, in owner: Owner, version: UInt64, compute: () -> RateTier) -> RateTier {
        if owner !== self.owner || version != self.version {
            tiers.removeAll(keepingCapacity: true)
            self.owner = owner
            self.version = version
        }
        if let entry = tiers[ObjectIdentifier(key)], entry.key === key { return entry.tier }
        let tier = compute()
        tiers[ObjectIdentifier(key)] = (key, tier)
        return tier
    }
}
