import AGConfig
import AGCrypto
import AGPolicy

/// A tenant as requests see it: its configuration plus everything derived from it once per
/// snapshot (keys, bucket keys, the RP ID hash, metric series, the proxy's tables).
final class Tenant: Sendable {
    let config: TenantConfig
    /// Redis hash tag for this tenant's keys: `ag:{TEAMID.bundle.id}:`.
    let keyPrefix: String
    let bucketKeys: TenantBucketKeys
    /// `ag:{APPID}:devepoch`: the tenant's device epoch (`DeviceEpoch`).
    let deviceEpochKey: String
    /// The prefixes of its per-record keys (`ag:{APPID}:dev:` …).
    let recordKeys: TenantRecordKeys
    /// SHA-256 of the App ID: the RP ID hash every authenticator data must start with.
    let rpIDHash: [UInt8]
    let series: TenantSeries
    /// Routes, upstream and header policy for proxied requests; `nil` when it proxies nothing.
    let proxy: TenantProxy?

    var appID: String { config.appID }

    init(config: TenantConfig, upstreamTLS: UpstreamTLSContexts) throws(ConfigError) {
        self.config = config
        keyPrefix = "ag:{\(config.appID)}:"
        bucketKeys = TenantBucketKeys(appID: config.appID)
        deviceEpochKey = keyPrefix + "devepoch"
        recordKeys = TenantRecordKeys(prefix: keyPrefix)
        rpIDHash = SHA256.hash(Array(config.appID.utf8))
        series = TenantSeries(appID: config.appID)
        proxy = try TenantProxy.make(config, tls: upstreamTLS)
    }

    /// The check of the tenant's `bucket` on `tier`.
    func bucket(_ bucket: TenantBucket, tier: RateTier) -> BucketCheck {
        let limit = switch bucket {
        case .attest: tier.attest
        case .challenge: tier.challenge
        case .api: tier.api
        }
        return bucketKeys.check(bucket, limitPerMinute: limit)
    }
}

/// A tenant's metric series names, rendered once per snapshot instead of per request.
struct TenantSeries: Sendable {
    let tokensIssued: String
    /// 402 `quota_exceeded` answers (DESIGN section 10's quota-refused count).
    let quotaRefused: String
    private let rateLimited: [String: String]

    init(appID: String) {
        tokensIssued = "attestgate_tokens_issued_total{tenant=\"\(appID)\"}"
        quotaRefused = "attestgate_quota_refused_total{tenant=\"\(appID)\"}"
        var limited: [String: String] = [:]
        for bucket in ["attest", "challenge", "api", "ip-challenge", "ip-validate", "ip-psso-nonce"] {
            limited[bucket] = "attestgate_rate_limited_total{tenant=\"\(appID)\",bucket=\"\(bucket)\"}"
        }
        rateLimited = limited
    }

    /// `attestgate_rate_limited_total` for the bucket named `bucket`.
    func rateLimited(_ bucket: String) -> String {
        rateLimited[bucket] ?? "attestgate_rate_limited_total{bucket=\"\(bucket)\"}"
    }
}

/// The prefixes of a tenant's per-record Redis keys, built once per snapshot: a record's key is
/// then one concatenation, one allocation, where `keyPrefix + "dev:" + keyID` made two.
struct TenantRecordKeys: Sendable {
    /// `ag:{APPID}:dev:`, `ch:`, `subj:`, `mad:`, `grace:`.
    let device, challenge, subject, monthlyActive, grace: String
    /// `ag:{APPID}:psso:dev:`, `psso:nonce:`, `psso:fam:`, `psso:rt:`.
    let platformSSODevice, platformSSONonce, platformSSOFamily, platformSSOToken: String

    init(prefix: String) {
        device = prefix + "dev:"
        challenge = prefix + "ch:"
        subject = prefix + "subj:"
        monthlyActive = prefix + "mad:"
        grace = prefix + "grace:"
        platformSSODevice = prefix + "psso:dev:"
        platformSSONonce = prefix + "psso:nonce:"
        platformSSOFamily = prefix + "psso:fam:"
        platformSSOToken = prefix + "psso:rt:"
    }
}
