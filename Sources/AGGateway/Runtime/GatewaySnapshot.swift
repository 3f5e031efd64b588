import Synchronization

/// One immutable, validated view of the configuration plus everything derived from it.
///
/// Built off the event loops (startup, reload) and swapped in whole; a request keeps the
/// snapshot it started with, so a reload never changes a request half way.
public final class GatewaySnapshot: Sendable {
    public let config: LoadedConfig
    /// Increases with every successful reload.
    public let generation: Int
    public let adminToken: String?
    /// Tenants by App ID (`TEAMID.bundle.id`).
    let tenants: [String: Tenant]

    public var gateway: GatewayConfig { config.gateway }

    init(config: LoadedConfig, generation: Int, adminToken: String?) {
        self.config = config
        self.generation = generation
        self.adminToken = adminToken
        var tenants: [String: Tenant] = [:]
        for tenantConfig in config.tenants.all {
            tenants[tenantConfig.appID] = Tenant(config: tenantConfig)
        }
        self.tenants = tenants
    }

    /// The tenant for a request's `X-Team-ID` and `X-Bundle-ID`.
    func tenant(teamID: String, bundleID: String) -> Tenant? {
        tenants[teamID + "." + bundleID]
    }
}

/// Holds the snapshot in force; workers read it at request start.
final class SnapshotStore: Sendable {
    private let current: Mutex<GatewaySnapshot>

    init(_ snapshot: GatewaySnapshot) {
        current = Mutex(snapshot)
    }

    var snapshot: GatewaySnapshot {
        current.withLock { $0 }
    }

    func replace(_ snapshot: GatewaySnapshot) {
        current.withLock { $0 = snapshot }
    }
}
