import AGHTTP

/// What one worker has heard about revoked devices (`RevocationWatcher`, fed by the events
/// stream); the device record itself is checked with every proxied request's bucket.
protocol RevocationState: AnyObject {
    /// Known revoked from the events stream; consulted when the device record cannot be.
    func isRevoked(appID: String, keyID: String) -> Bool
}

/// Sends an admitted request upstream and streams the answer back (`UpstreamForwarder`).
protocol Forwarder: AnyObject {
    /// `injected` are the claim and payload headers (empty on `auth: none` routes). Answers the
    /// request itself, through `context`.
    func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, injected: InjectedHeaders)
}
