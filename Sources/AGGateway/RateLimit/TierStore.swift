import AGConfig
import AGPolicy
import AGFormats
import AGRedis
import AGSync
import Synchronization

/// Runtime tier state of one instance, shared by its workers: the file's tiers (from the
/// snapshot) overlaid with the overrides operators set through the admin API.
///
/// The overrides live in Redis (`ag:{cfg}:tenant-tier`: appId → tier name; `ag:{cfg}:tiers`:
/// tier name → `TierNumbers` JSON), so they reach every instance and survive restarts; this is
/// the local copy `TierSync` keeps current. The `{cfg}` hash tag keeps both hashes and the
/// events stream in one cluster slot, so one script changes a hash and records the event. Reads take an uncontended mutex for a few dictionary
/// lookups.
public final class TierStore: Sendable {
    public static let tenantTiersKey = "ag:{cfg}:tenant-tier"
    public static let tierNumbersKey = "ag:{cfg}:tiers"
    public static let eventsStream = GatewayEvents.stream
    /// Where versions before the cluster support kept the hashes; `migrateLegacyKeys` moves them.
    public static let legacyKeys = [("ag:cfg:tenant-tier", tenantTiersKey), ("ag:cfg:tiers", tierNumbersKey)]

    /// The overrides as stored in Redis.
    public struct Overrides: Sendable, Hashable {
        /// appId → tier name.
        public var tenantTiers: [String: String]
        /// Tier name → numbers laid over the file's.
        public var tierNumbers: [String: TierNumbers]

        public init(tenantTiers: [String: String] = [:], tierNumbers: [String: TierNumbers] = [:]) {
            self.tenantTiers = tenantTiers
            self.tierNumbers = tierNumbers
        }
    }

    private let state = Locked(Overrides())
    /// Moves on with every change of the overrides (after it, inside the lock), so a worker's
    /// memo of effective tiers (`TierMemo`) knows when to forget them.
    private let changes = Atomic<UInt64>(0)

    public init() {}

    /// The number of changes so far; equal values mean the same overrides.
    public var version: UInt64 { changes.load(ordering: .acquiring) }

    /// A copy of the overrides in force.
    public var overrides: Overrides {
        state.withLock { $0 }
    }

    /// Replaces every override at once (after reading both hashes).
    public func replace(_ overrides: Overrides) {
        _ = replace(overrides, unlessChangedSince: nil)
    }

    /// `replace`, unless the overrides changed after `version` was read (false then): a
    /// re-read sent before a change this instance applied (an admin call's own, on a worker, or
    /// an event) may not undo it. Without this, a `PUT` answered on one worker was undone for a
    /// moment by the control loop's re-read that had left before it.
    public func replace(_ overrides: Overrides, unlessChangedSince version: UInt64?) -> Bool {
        state.withLock {
            if let version, changes.load(ordering: .relaxed) != version { return false }
            guard $0 != overrides else { return true }
            $0 = overrides
            changes.add(1, ordering: .releasing)
            return true
        }
    }

    /// The tier a tenant's requests are limited by.
    ///
    /// A tenant override wins when the tier it names exists, in the file or at runtime; an
    /// override naming a tier that has since vanished is ignored. Runtime numbers replace the
    /// file's field by field. `fileTier` always exists in `fileTiers` (the configuration
    /// checks it); should it not, the built-in `free` tier applies.
    public func effectiveTier(appID: String, fileTier: String, fileTiers: [String: RateTier]) -> RateTier {
        state.withLock { overrides in
            if let name = overrides.tenantTiers[appID], let tier = Self.resolve(name, overrides, fileTiers) {
                return tier
            }
            return Self.resolve(fileTier, overrides, fileTiers) ?? RateTier.builtIn["free"]!
        }
    }

    /// The tenant's runtime tier override, if any (for the admin API).
    public func tenantTierOverride(appID: String) -> String? {
        state.withLock { $0.tenantTiers[appID] }
    }

    /// The runtime numbers stored for `name`, if any (for the admin API).
    public func runtimeNumbers(tier name: String) -> TierNumbers? {
        state.withLock { $0.tierNumbers[name] }
    }

    /// Every tier with runtime numbers applied, including tiers only the runtime defines.
    public func effectiveTiers(fileTiers: [String: RateTier]) -> [String: RateTier] {
        state.withLock { overrides in
            var tiers: [String: RateTier] = [:]
            for name in Set(fileTiers.keys).union(overrides.tierNumbers.keys) {
                tiers[name] = Self.resolve(name, overrides, fileTiers)
            }
            return tiers
        }
    }

    /// Runtime numbers that make no tier: a subset of a tier's numbers (`PUT` on a file tier)
    /// whose tier is no longer in the file. They apply again if the tier comes back; the admin
    /// API lists them so that they can be seen and removed.
    public func runtimeNumbersWithoutTier(fileTiers: [String: RateTier]) -> [String: TierNumbers] {
        state.withLock { overrides in
            overrides.tierNumbers.filter { Self.resolve($0.key, overrides, fileTiers) == nil }
        }
    }

    /// The tenant overrides (App ID → tier name) naming a tier that exists neither in
    /// `fileTiers` nor at runtime: ignored, so each is worth a warning.
    public func overridesNamingNoTier(fileTiers: [String: RateTier]) -> [(appID: String, tier: String)] {
        state.withLock { overrides in
            overrides.tenantTiers.filter { Self.resolve($0.value, overrides, fileTiers) == nil }
                .map { (appID: $0.key, tier: $0.value) }.sorted { $0.appID < $1.appID }
        }
    }

    /// Whether `name` is a tier a tenant may be moved to.
    public func tierExists(_ name: String, fileTiers: [String: RateTier]) -> Bool {
        state.withLock { Self.resolve(name, $0, fileTiers) != nil }
    }

    private static func resolve(_ name: String, _ overrides: Overrides, _ fileTiers: [String: RateTier]) -> RateTier? {
        guard let numbers = overrides.tierNumbers[name] else { return fileTiers[name] }
        return numbers.tier(named: name, over: fileTiers[name])
    }

    // MARK: Events

    /// A change recorded on the events stream.
    public enum Event: Sendable, Hashable {
        /// A tenant's override was set (`tier`) or removed (nil).
        case tenantTier(appID: String, tier: String?)
        /// A tier's runtime numbers were set, or removed (nil).
        case tierNumbers(name: String, numbers: TierNumbers?)

        /// Parses `{"type":"tenant-tier","appId":…,"tier":… or null}` or
        /// `{"type":"tiers","tier":…,"numbers":{…} or null}`; nil for anything else (other event types
        /// share the stream).
        public init?(json: some Collection<UInt8>) {
            guard let value = try? JSONValue(parsing: json), let type = value["type"]?.stringValue else { return nil }
            switch type {
            case "tenant-tier":
                guard let appID = value["appId"]?.stringValue else { return nil }
                switch value["tier"] {
                case .string(let tier)?: self = .tenantTier(appID: appID, tier: tier)
                case .null?, nil: self = .tenantTier(appID: appID, tier: nil)
                default: return nil
                }
            case "tiers":
                guard let name = value["tier"]?.stringValue, let numbersValue = value["numbers"] else { return nil }
                if numbersValue == .null {
                    self = .tierNumbers(name: name, numbers: nil)
                } else {
                    guard let numbers = try? TierNumbers(json: numbersValue.serialized()) else { return nil }
                    self = .tierNumbers(name: name, numbers: numbers)
                }
            default:
                return nil
            }
        }

        public var json: String {
            let value: JSONValue = switch self {
            case .tenantTier(let appID, let tier):
                ["type": "tenant-tier", "appId": .string(appID), "tier": tier.map(JSONValue.string) ?? .null]
            case .tierNumbers(let name, let numbers):
                ["type": "tiers", "tier": .string(name), "numbers": numbers?.jsonValue ?? .null]
            }
            return value.serializedString()
        }
    }

    /// Applies one announced change at once, ahead of the full re-read `TierSync` does next.
    public func apply(event: Event) {
        state.withLock { overrides in
            switch event {
            case .tenantTier(let appID, let tier):
                overrides.tenantTiers[appID] = tier
            case .tierNumbers(let name, let numbers):
                overrides.tierNumbers[name] = numbers
            }
            changes.add(1, ordering: .releasing)
        }
    }

    // MARK: Loading

    /// Reads both hashes in one atomic script call.
    static let readScript = RedisScript("""
        return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
        """)

    /// Reads the overrides from Redis. Entries that do not parse (written by hand, say) are
    /// left out and described in `ignored`.
    public static func fetch(from redis: RedisClient,
                             completion: @escaping (Result<(overrides: Overrides, ignored: [String]), RedisError>) -> Void) {
        redis.evalScript(readScript, keys: [tenantTiersKey, tierNumbersKey]) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                guard let parts = reply.array, parts.count == 2, let tenants = parts[0].hashFields,
                      let tiers = parts[1].hashFields else {
                    completion(.failure(.server("unexpected reply reading tier overrides")))
                    return
                }
                var overrides = Overrides()
                var ignored: [String] = []
                for (appID, tier) in tenants {
                    guard TierNumbers.isValidTierName(tier) else {
                        ignored.append("\(tenantTiersKey) \(appID): invalid tier name")
                        continue
                    }
                    overrides.tenantTiers[appID] = tier
                }
                for (name, json) in tiers {
                    do throws(TierChangeError) {
                        guard TierNumbers.isValidTierName(name) else { throw .invalidTierName(name) }
                        overrides.tierNumbers[name] = try TierNumbers(json: json)
                    } catch {
                        ignored.append("\(tierNumbersKey) \(name): \(error)")
                    }
                }
                completion(.success((overrides, ignored.sorted())))
            }
        }
    }

    /// Moves hashes written by a version before the cluster support (`ag:cfg:*`) to their
    /// `{cfg}` names, unless those exist already. Not on a cluster, where the old scripts could
    /// not have run (and a rename across slots cannot). Completes with whether Redis answered
    /// both (an error reply such as "no such key", the usual case, counts as answered).
    public static func migrateLegacyKeys(on redis: RedisClient, completion: @escaping (Bool) -> Void) {
        guard case .cluster = redis.url.topology else {
            var left = legacyKeys.count
            var answered = true
            for (old, new) in legacyKeys {
                redis.send(["RENAMENX", old, new]) { result in
                    if case .failure(let error) = result, !error.isServerReply { answered = false }
                    left -= 1
                    if left == 0 { completion(answered) }
                }
            }
            return
        }
        completion(true)
    }

    /// Replaces the overrides with what Redis holds; completes with the ignored entries.
    /// (Run `migrateLegacyKeys` first on a deployment upgraded from `ag:cfg:*` hashes.)
    public func load(from redis: RedisClient, completion: @escaping (Result<[String], RedisError>) -> Void) {
        Self.fetch(from: redis) { result in
            completion(result.map { fetched in
                self.replace(fetched.overrides)
                return fetched.ignored
            })
        }
    }
}
