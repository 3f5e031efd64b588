import AGConfig
import AGPolicy
import AGRedis

/// The admin API's tier changes. Each one writes its hash and appends the change to the events
/// stream in one script call (all three keys share the `{cfg}` slot), so no instance can see
/// the write without the event following; this instance's copy changes as soon as Redis
/// confirms.
extension TierStore {
    /// `KEYS`: tenant tiers, tier numbers, events stream. `ARGV`: appId, tier, `1` when this
    /// instance already knows the tier, event. Returns 0 without writing when the tier is
    /// unknown here and `KEYS[2]` has no complete, valid numbers for it (another instance may
    /// have just created it; numbers for part of a tier make none without the file's tier).
    static let setTenantTierScript = RedisScript("""
        if ARGV[3] ~= '1' then
          local stored = redis.call('HGET', KEYS[2], ARGV[2])
          if not stored then return 0 end
          local ok, numbers = pcall(cjson.decode, stored)
          local function positive(v) return type(v) == 'number' and v >= 1 and v % 1 == 0 end
          if not ok or type(numbers) ~= 'table' or not positive(numbers.attest) or not positive(numbers.challenge)
             or not positive(numbers.api) or not (positive(numbers.mad_limit) or numbers.mad_limit == 'unlimited') then
            return 0
          end
        end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        """ + GatewayEvents.luaAppend(streamKey: 3, eventArgument: 4) + "return 1\n")

    /// Removes one override: a tenant's tier, or a tier's runtime numbers. `KEYS`: the hash
    /// (tenant tiers or tier numbers), events stream. `ARGV`: the field (appId or tier name),
    /// event. Returns whether there was one to remove.
    static let removeOverrideScript = RedisScript("""
        local removed = redis.call('HDEL', KEYS[1], ARGV[1])
        """ + GatewayEvents.luaAppend(streamKey: 2, eventArgument: 2) + "return removed\n")

    /// `KEYS`: tier numbers, events stream. `ARGV`: tier name, numbers JSON, event.
    static let setTierScript = RedisScript("""
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        """ + GatewayEvents.luaAppend(streamKey: 2, eventArgument: 3) + "return 1\n")

    /// Moves a tenant to `tier` at runtime (`PUT /admin/v1/tenants/{appId}/tier`).
    ///
    /// Fails with `.invalidTierName`, `.unknownTier` (neither the file nor the runtime defines
    /// it) or `.store`. Whether `appID` is a configured tenant is the caller's check.
    public func setTenantTier(appID: String, tier: String, fileTiers: [String: RateTier], redis: RedisClient,
                              completion: @escaping (Result<Void, TierChangeError>) -> Void) {
        guard TierNumbers.isValidTierName(tier) else {
            completion(.failure(.invalidTierName(tier)))
            return
        }
        let event = Event.tenantTier(appID: appID, tier: tier)
        let known = tierExists(tier, fileTiers: fileTiers) ? "1" : "0"
        redis.evalScript(Self.setTenantTierScript, keys: [Self.tenantTiersKey, Self.tierNumbersKey, Self.eventsStream],
                         args: [appID, tier, known, event.json]) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.store(error)))
            case .success(let reply) where reply.int == 1:
                self.apply(event: event)
                completion(.success(()))
            case .success:
                completion(.failure(.unknownTier(tier)))
            }
        }
    }

    /// Returns a tenant to its file tier (`DELETE /admin/v1/tenants/{appId}/tier`); completes
    /// with whether there was an override to remove.
    public func clearTenantTier(appID: String, redis: RedisClient,
                                completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        removeOverride(field: appID, of: Self.tenantTiersKey, event: .tenantTier(appID: appID, tier: nil), redis: redis,
                       completion: completion)
    }

    /// Sets a tier's runtime numbers (`PUT /admin/v1/tiers/{name}`), replacing earlier runtime
    /// numbers for it; completes with the tier now in force.
    ///
    /// A tier the file defines may get any subset of the numbers; a new tier needs all four.
    public func setTier(name: String, numbers: TierNumbers, fileTiers: [String: RateTier], redis: RedisClient,
                        completion: @escaping (Result<RateTier, TierChangeError>) -> Void) {
        guard TierNumbers.isValidTierName(name) else {
            completion(.failure(.invalidTierName(name)))
            return
        }
        guard let tier = numbers.tier(named: name, over: fileTiers[name]) else {
            let missing = numbers.missingFields.joined(separator: ", ")
            completion(.failure(.invalidNumbers("tier \"\(name)\" is not in the configuration, so it needs all numbers; missing \(missing)")))
            return
        }
        let event = Event.tierNumbers(name: name, numbers: numbers)
        redis.evalScript(Self.setTierScript, keys: [Self.tierNumbersKey, Self.eventsStream],
                         args: [name, numbers.json, event.json]) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.store(error)))
            case .success:
                self.apply(event: event)
                completion(.success(tier))
            }
        }
    }

    /// Removes a tier's runtime numbers (`DELETE /admin/v1/tiers/{name}`): a file tier is the
    /// file's again, a tier only the runtime defined is gone (tenants moved to it fall back to
    /// their file tier, which a reload warns about). Completes with whether there were numbers.
    public func clearTier(name: String, redis: RedisClient, completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        guard TierNumbers.isValidTierName(name) else {
            completion(.failure(.invalidTierName(name)))
            return
        }
        removeOverride(field: name, of: Self.tierNumbersKey, event: .tierNumbers(name: name, numbers: nil), redis: redis,
                       completion: completion)
    }

    /// `removeOverrideScript` on `field` of `hash`, then `event` applied here; completes with
    /// whether there was an override to remove.
    private func removeOverride(field: String, of hash: String, event: Event, redis: RedisClient,
                                completion: @escaping (Result<Bool, TierChangeError>) -> Void) {
        redis.evalScript(Self.removeOverrideScript, keys: [hash, Self.eventsStream], args: [field, event.json]) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.store(error)))
            case .success(let reply):
                self.apply(event: event)
                completion(.success((reply.int ?? 0) > 0))
            }
        }
    }
}
