import AGConfig
import AGHTTP
import AGPolicy

/// What one worker knows about revoked devices (`RevocationWatcher` fed by `ag:events`), and
/// the store lookup for a token it has not yet checked.
protocol RevocationState: AnyObject {
    /// Increases whenever the feed may have missed events; a token checked under an older
    /// epoch is checked against the store again.
    var epoch: Int { get }
    func isRevoked(appID: String, keyID: String) -> Bool
    func markRevoked(appID: String, keyID: String)
    /// Asks the store whether the device is revoked (true) or not (false).
    func checkStore(tenant: Tenant, keyID: String, completion: @escaping (Result<Bool, StoreFailure>) -> Void)
}

/// Sends an admitted request upstream and streams the answer back (`UpstreamForwarder`).
protocol Forwarder: AnyObject {
    /// `injected` are the claim and payload headers (empty on `auth: none` routes). Answers the
    /// request itself, through `context`.
    func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, injected: [(name: String, value: String)])
}
