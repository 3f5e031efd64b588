import AGConfig
import AGPolicy
import AGRedis

/// Tier reads for every limited request and the admin API's runtime tier changes.
protocol TierAdministration: AnyObject {
    /// The tier a tenant's requests are limited by now (file tier or runtime override).
    func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier
    func tenantTierOverride(appID: String) -> String?
    func effectiveTiers(fileTiers: [String: RateTier]) -> [String: RateTier]
    func setTenantTier(appID: String, tier: String, fileTiers: [String: RateTier],
                       completion: @escaping (Result<Void, TierChangeError>) -> Void)
    func clearTenantTier(appID: String, completion: @escaping (Result<Bool, TierChangeError>) -> Void)
    func setTier(name: String, numbers: TierNumbers, fileTiers: [String: RateTier],
                 completion: @escaping (Result<RateTier, TierChangeError>) -> Void)
}

/// The instance's `TierStore`, with its changes written through one worker's Redis connection.
final class RedisTierAdministration: TierAdministration {
    private let store: TierStore
    private let redis: RedisClient

    init(store: TierStore, redis: RedisClient) {
        self.store = store
        self.redis = redis
    }

    func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier {
        store.effectiveTier(appID: appID, fileTier: fileTier, fileTiers: fileTiers)
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
}
