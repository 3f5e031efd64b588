import AGConfig
import AGPolicy
import AGFormats
import AGRedis

/// A runtime change to a tier's numbers, as `PUT /admin/v1/tiers/{name}` sends it and
/// `ag:cfg:tiers` stores it: `{"attest":…,"challenge":…,"api":…,"mad_limit":… or "unlimited"}`.
///
/// Fields left out keep the file's value, so a tier the configuration defines may be changed
/// one number at a time; a tier that exists only at runtime needs all four.
public struct TierNumbers: Sendable, Hashable {
    public var attest: Int?
    public var challenge: Int?
    public var api: Int?
    public var madLimit: DeviceLimit?

    public static let fieldNames = ["attest", "challenge", "api", "mad_limit"]

    public init(attest: Int? = nil, challenge: Int? = nil, api: Int? = nil, madLimit: DeviceLimit? = nil) {
        self.attest = attest
        self.challenge = challenge
        self.api = api
        self.madLimit = madLimit
    }

    /// Parses and validates a JSON object: per-minute limits are integers from 1 to
    /// `TokenBucket.maximumLimitPerMinute`, `mad_limit` a positive integer or `"unlimited"`,
    /// at least one field, no others.
    public init(json: some Collection<UInt8>) throws(TierChangeError) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: json)
        } catch {
            throw .invalidNumbers(error.description)
        }
        guard let members = value.objectValue else {
            throw .invalidNumbers("expected a JSON object with \(Self.fieldNames.joined(separator: ", "))")
        }
        if let unknown = members.keys.sorted().first(where: { !Self.fieldNames.contains($0) }) {
            throw .invalidNumbers("unknown field \"\(unknown)\"; expected \(Self.fieldNames.joined(separator: ", "))")
        }
        guard !members.isEmpty else {
            throw .invalidNumbers("no numbers given; expected \(Self.fieldNames.joined(separator: ", "))")
        }
        func limit(_ name: String) throws(TierChangeError) -> Int? {
            guard let member = members[name] else { return nil }
            guard case .integer(let number) = member, number >= 1, number <= TokenBucket.maximumLimitPerMinute else {
                throw .invalidNumbers("\(name) must be an integer from 1 to \(TokenBucket.maximumLimitPerMinute)")
            }
            return Int(number)
        }
        attest = try limit("attest")
        challenge = try limit("challenge")
        api = try limit("api")
        switch members["mad_limit"] {
        case nil:
            madLimit = nil
        case .string("unlimited"):
            madLimit = .unlimited
        case .integer(let number) where number >= 1:
            madLimit = .limited(Int(number))
        default:
            throw .invalidNumbers("mad_limit must be a positive integer or \"unlimited\"")
        }
    }

    public init(json: String) throws(TierChangeError) {
        try self.init(json: Array(json.utf8))
    }

    /// The canonical JSON object (keys sorted, absent fields left out).
    public var jsonValue: JSONValue {
        var members: [String: JSONValue] = [:]
        if let attest { members["attest"] = .integer(Int64(attest)) }
        if let challenge { members["challenge"] = .integer(Int64(challenge)) }
        if let api { members["api"] = .integer(Int64(api)) }
        switch madLimit {
        case .limited(let limit): members["mad_limit"] = .integer(Int64(limit))
        case .unlimited: members["mad_limit"] = "unlimited"
        case nil: break
        }
        return .object(members)
    }

    public var json: String { jsonValue.serializedString() }

    /// Whether all four numbers are present, as a tier unknown to the file needs.
    public var isComplete: Bool {
        attest != nil && challenge != nil && api != nil && madLimit != nil
    }

    /// The missing field names, in `fieldNames` order.
    public var missingFields: [String] {
        zip(Self.fieldNames, [attest == nil, challenge == nil, api == nil, madLimit == nil]).filter(\.1).map(\.0)
    }

    /// `base` with these numbers laid over it; without a base, the tier these numbers alone
    /// define, or nil when some are missing.
    public func tier(named name: String, over base: RateTier?) -> RateTier? {
        if let base {
            return RateTier(name: name, attest: attest ?? base.attest, challenge: challenge ?? base.challenge,
                            api: api ?? base.api, madLimit: madLimit ?? base.madLimit)
        }
        guard let attest, let challenge, let api, let madLimit else { return nil }
        return RateTier(name: name, attest: attest, challenge: challenge, api: api, madLimit: madLimit)
    }

    /// Tier names follow the configuration's rule: lowercase letters, digits, `-` and `_`, at
    /// most 32 characters.
    public static func isValidTierName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 32
            && name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x5F }
    }
}

/// Why a runtime tier change was refused. Admin handlers map `invalidTierName` and
/// `invalidNumbers` to 400, `unknownTier` to 404 and `store` to 503.
public enum TierChangeError: Error, Sendable, Hashable, CustomStringConvertible {
    case invalidTierName(String)
    case invalidNumbers(String)
    /// A tenant override names a tier that neither the file nor the runtime defines.
    case unknownTier(String)
    case store(RedisError)

    public var description: String {
        switch self {
        case .invalidTierName(let name):
            "invalid tier name \"\(name)\": use lowercase letters, digits, - and _ (at most 32 characters)"
        case .invalidNumbers(let reason): reason
        case .unknownTier(let name): "unknown tier \"\(name)\""
        case .store(let error): error.description
        }
    }
}
