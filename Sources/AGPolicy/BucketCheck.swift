import AGConfig

/// A tenant's token buckets (`ag:{APPID}:rl:<bucket>`).
public enum TenantBucket: String, Sendable, Hashable, CaseIterable {
    /// Validate and refresh share it.
    case attest
    case challenge
    /// Proxied requests.
    case api
}

/// A client IP's token buckets (`ag:ip:{<ip>}:rl:<bucket>`); refresh has none.
public enum IPBucket: String, Sendable, Hashable, CaseIterable {
    case challenge
    case validate
    /// Platform SSO server nonces.
    case pssoNonce = "psso-nonce"
}

/// One bucket a request must take a token from: its Redis key, its limit, and a name for
/// logs and metrics.
public struct BucketCheck: Sendable, Hashable {
    public let key: String
    public let limitPerMinute: Int
    /// `attest`, `challenge`, `api`, `ip-challenge`, `ip-validate` or `ip-psso-nonce`.
    public let name: String

    /// Limits beyond `TokenBucket.maximumLimitPerMinute` are clamped to it; below 1, to 1.
    public init(key: String, limitPerMinute: Int, name: String) {
        self.key = key
        self.limitPerMinute = TokenBucket.clampedLimit(limitPerMinute)
        self.name = name
    }

    /// A tenant bucket, keyed under the tenant's hash tag.
    public static func tenant(appID: String, _ bucket: TenantBucket, limitPerMinute: Int) -> BucketCheck {
        BucketCheck(key: "ag:{\(appID)}:rl:\(bucket.rawValue)", limitPerMinute: limitPerMinute, name: bucket.rawValue)
    }

    /// A client-IP bucket; IPv4-mapped IPv6 addresses share their IPv4 address's bucket.
    public static func ip(_ address: IPAddress, _ bucket: IPBucket, limitPerMinute: Int) -> BucketCheck {
        BucketCheck(key: "ag:ip:{\(address.unmappingIPv4)}:rl:\(bucket.rawValue)", limitPerMinute: limitPerMinute,
                    name: "ip-" + bucket.rawValue)
    }
}

/// A tenant's bucket keys, built once per snapshot (`ag:{APPID}:rl:<bucket>`).
public struct TenantBucketKeys: Sendable, Hashable {
    public let attest: String
    public let challenge: String
    public let api: String

    public init(appID: String) {
        attest = "ag:{\(appID)}:rl:attest"
        challenge = "ag:{\(appID)}:rl:challenge"
        api = "ag:{\(appID)}:rl:api"
    }

    /// The check of `bucket` at `limitPerMinute`.
    public func check(_ bucket: TenantBucket, limitPerMinute: Int) -> BucketCheck {
        let key = switch bucket {
        case .attest: attest
        case .challenge: challenge
        case .api: api
        }
        return BucketCheck(key: key, limitPerMinute: limitPerMinute, name: bucket.rawValue)
    }
}

/// The limited routes, and which buckets each one draws from (DESIGN section 7).
public enum RateLimitedRoute: Sendable, Hashable {
    /// `GET …/challenge`: tenant `challenge` and IP `challenge`.
    case challenge
    /// Attestation validation: tenant `attest` and IP `validate`.
    case validate
    /// Assertion refresh: tenant `attest` only.
    case refresh
    /// A proxied request: tenant `api` only.
    case api

    /// The checks for a request by `clientIP` to tenant `appID` on `tier`.
    public func checks(appID: String, clientIP: IPAddress, tier: RateTier, ipLimits: IPLimitConfig) -> [BucketCheck] {
        checks(tenant: TenantBucketKeys(appID: appID), clientIP: { clientIP }, tier: tier, ipLimits: ipLimits)
    }

    /// The checks for a request to the tenant with bucket keys `tenant` on `tier`; `clientIP`
    /// is asked only by the routes that have a per-IP bucket.
    public func checks(tenant: TenantBucketKeys, clientIP: () -> IPAddress, tier: RateTier,
                       ipLimits: IPLimitConfig) -> [BucketCheck] {
        switch self {
        case .challenge:
            [tenant.check(.challenge, limitPerMinute: tier.challenge),
             .ip(clientIP(), .challenge, limitPerMinute: ipLimits.challenge)]
        case .validate:
            [tenant.check(.attest, limitPerMinute: tier.attest),
             .ip(clientIP(), .validate, limitPerMinute: ipLimits.validate)]
        case .refresh:
            [tenant.check(.attest, limitPerMinute: tier.attest)]
        case .api:
            [Self.apiCheck(tenant: tenant, tier: tier)]
        }
    }

    /// The `api` route's one check, without the array (per proxied request).
    public static func apiCheck(tenant: TenantBucketKeys, tier: RateTier) -> BucketCheck {
        tenant.check(.api, limitPerMinute: tier.api)
    }

    /// What to do without Redis: attestation routes need Redis anyway and fail closed; proxied
    /// requests follow `rate_limits.on_store_error`.
    public func fallback(_ config: RateLimitConfig) -> RateLimitFallback {
        switch self {
        case .challenge, .validate, .refresh: .refuse
        case .api: RateLimitFallback(config.onStoreError)
        }
    }
}

/// What a limited route does when Redis cannot answer.
public enum RateLimitFallback: Sendable, Hashable {
    /// Refuse with 503 `store_unavailable`: the attestation routes (they need Redis anyway),
    /// and proxied requests under `rate_limits.on_store_error: deny`.
    case refuse
    /// Enforce the limits with this instance's `LocalBuckets`.
    case local
    /// Let the request through unmetered.
    case allow

    /// The behaviour `rate_limits.on_store_error` asks for.
    public init(_ policy: StoreErrorPolicy) {
        switch policy {
        case .local: self = .local
        case .allow: self = .allow
        case .deny: self = .refuse
        }
    }
}
