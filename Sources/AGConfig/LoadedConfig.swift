/// A complete, validated configuration: one immutable snapshot for the workers to share.
public struct LoadedConfig: Sendable {
    public let gateway: GatewayConfig
    public let tenants: TenantDirectory

    public init(gateway: GatewayConfig, tenants: TenantDirectory) {
        self.gateway = gateway
        self.tenants = tenants
    }
}

/// All tenants from `tenants_dir`, sorted by file name, indexed by App ID.
public struct TenantDirectory: Sendable {
    public let all: [TenantConfig]
    private let indexByAppID: [String: Int]

    init(_ tenants: [TenantConfig]) {
        all = tenants
        indexByAppID = Dictionary(tenants.enumerated().map { ($1.appID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The tenant for `TEAMID.bundle.id`.
    public func tenant(appID: String) -> TenantConfig? {
        indexByAppID[appID].map { all[$0] }
    }

    /// The tenant named by the `X-Team-ID` and `X-Bundle-ID` request headers.
    public func tenant(teamID: String, bundleID: String) -> TenantConfig? {
        tenant(appID: teamID + "." + bundleID)
    }
}
