import AGConfig
import AGPolicy
import AGHTTP

/// Everything the proxy needs about one tenant, assembled when the snapshot is built: the
/// route table, the resolved upstream, and the forwarding header policy.
final class TenantProxy: Sendable {
    let routes: ProxyRouteTable
    let target: UpstreamTarget
    let headers: ForwardHeaderPolicy

    /// `nil` when the tenant proxies nothing (no routes or no upstream). A host name is kept
    /// as a name: each worker resolves it when forwarding (asynchronously, TTL-cached). An https
    /// upstream gets the snapshot's client context for its roots (`upstream_ca` or the system
    /// store), built once per snapshot.
    static func make(_ config: TenantConfig, tls: UpstreamTLSContexts) throws(ConfigError) -> TenantProxy? {
        guard let upstream = config.upstream, !config.routes.isEmpty else { return nil }
        let context = upstream.isTLS ? try tls.context(for: config.upstreamCA, tenantFile: config.sourcePath) : nil
        let target: UpstreamTarget
        do {
            target = try UpstreamTarget(host: upstream.host, port: upstream.port, basePath: upstream.basePath, tls: context)
        } catch {
            throw ConfigError(problems: [ConfigProblem(file: config.sourcePath, line: nil, keyPath: "upstream",
                                                       message: error.description)])
        }
        return TenantProxy(routes: ProxyRouteTable(config.routes), target: target,
                           headers: ForwardHeaderPolicy(forward: config.forward, tokenHeader: config.token.header,
                                                        upstreamHost: upstream.authority))
    }

    private init(routes: ProxyRouteTable, target: UpstreamTarget, headers: ForwardHeaderPolicy) {
        self.routes = routes
        self.target = target
        self.headers = headers
    }
}

extension GatewaySnapshot {
    /// How long a token can stay valid: the longest configured lifetime plus the leeway.
    /// A revoked device is remembered this long, after which none of its tokens can pass.
    var longestTokenLifetime: Duration {
        let tokens = gateway.tokens
        return tenants.values.map(\.config.token.ttl).reduce(tokens.ttl, max) + tokens.leeway
    }
}
