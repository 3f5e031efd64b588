/// A tenant as requests see it: its configuration plus what is derived from it once per snapshot.
final class Tenant: Sendable {
    let config: TenantConfig
    /// Redis hash tag for this tenant's keys: `{TEAMID.bundle.id}`.
    let keyPrefix: String

    var appID: String { config.appID }

    init(config: TenantConfig) {
        self.config = config
        self.keyPrefix = "ag:{\(config.appID)}:"
    }
}
