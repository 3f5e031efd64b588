import AGConfig
import AGPolicy

/// A tenant as requests see it: its configuration plus what is derived from it once per snapshot.
final class Tenant: Sendable {
    let config: TenantConfig
    /// Redis hash tag for this tenant's keys: `{TEAMID.bundle.id}`.
    let keyPrefix: String
    /// Routes, upstream and header policy for proxied requests; `nil` when it proxies nothing.
    let proxy: TenantProxy?

    var appID: String { config.appID }

    init(config: TenantConfig) throws(ConfigError) {
        self.config = config
        self.keyPrefix = "ag:{\(config.appID)}:"
        self.proxy = try TenantProxy.make(config)
    }
}
