import AGConfig
import AGCrypto
import AGHTTP
import AGPolicy
import AGSync

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
    /// The same tenants, found from a request's header bytes.
    let tenantIndex: TenantIndex
    let tokenKeys: TokenKeys
    /// Every tenant's Platform SSO endpoints, by path.
    let platformSSO: PlatformSSORoutes
    /// Roots App Attest attestations must chain to (Apple's, plus the test CA when configured).
    let appAttestRoots: AppAttestRoots
    /// The public listener's TLS context from `server.tls` (chain and key checked), or nil.
    let serverTLS: TLSServerContext?
    /// `tokens.issuer` and `tokens.leeway` in seconds, as every proxied request checks them.
    let tokenClaims: TokenClaimsPolicy
    /// Where a request without tenant headers may carry the token that names its tenant:
    /// `Authorization`, then each tenant's own `token.header` (distinct, in file order).
    let tokenHeaders: [TokenHeaderName]

    public var gateway: GatewayConfig { config.gateway }

    var tokenIssuer: TokenIssuer { TokenIssuer(keys: tokenKeys, issuer: gateway.tokens.issuer) }

    /// Builds a snapshot; throws when a token key or App Attest root file cannot be parsed.
    init(config: LoadedConfig, generation: Int, adminToken: String?) throws(ConfigError) {
        self.config = config
        self.generation = generation
        self.adminToken = adminToken
        tokenClaims = TokenClaimsPolicy(issuer: config.gateway.tokens.issuer, leeway: config.gateway.tokens.leeway.seconds)
        var problems: [ConfigProblem] = []
        var tokenKeys: TokenKeys?
        var appAttestRoots: AppAttestRoots?
        var serverTLS: TLSServerContext?
        do {
            tokenKeys = try TokenKeys(config.gateway.tokens)
        } catch {
            problems += error.problems
        }
        do {
            appAttestRoots = try AppAttestRoots(config.gateway.appAttest)
        } catch {
            problems += error.problems
        }
        if let files = config.gateway.server.tls {
            do {
                serverTLS = try TLSServerContext.load(files)
            } catch {
                problems += error.problems
            }
        }
        guard problems.isEmpty, let tokenKeys, let appAttestRoots else { throw ConfigError(problems: problems) }
        self.tokenKeys = tokenKeys
        self.appAttestRoots = appAttestRoots
        self.serverTLS = serverTLS
        var tenants: [String: Tenant] = [:]
        let upstreamTLS = UpstreamTLSContexts()
        for tenantConfig in config.tenants.all {
            tenants[tenantConfig.appID] = try Tenant(config: tenantConfig, upstreamTLS: upstreamTLS)
        }
        self.tenants = tenants
        var tokenHeaders = [TokenHeaderName.authorization]
        for tenantConfig in config.tenants.all where tenants[tenantConfig.appID]?.proxy != nil {
            let name = TokenHeaderName(tenantConfig.token.header)
            if !tokenHeaders.contains(where: { $0.text.equalsIgnoringASCIICase(name.text) }) { tokenHeaders.append(name) }
        }
        self.tokenHeaders = tokenHeaders
        tenantIndex = TenantIndex(tenants.values)
        platformSSO = PlatformSSORoutes(tenants: tenants.values, signer: tokenKeys.signer)
    }

    /// Everything `serve` would reject in the configuration at `path`, one line per problem
    /// (`attestgate check-config`): the files, and the key files' contents.
    public static func check(path: String) -> [String] {
        do {
            let config = try ConfigLoader.load(path: path)
            _ = try GatewaySnapshot(config: config, generation: 0, adminToken: nil)
            return []
        } catch {
            return error.lines
        }
    }

    /// Logs, loudly, that attestations certified by the test CA are accepted.
    func warnIfTestCATrusted(_ logger: Logger) {
        guard appAttestRoots.trustsTestCA, let file = gateway.appAttest.testCAFile else { return }
        logger.warn("TEST CA TRUSTED: attestations signed by it are accepted", [
            ("file", .string(file)), ("allowTestCAWithProduction", .bool(gateway.appAttest.allowTestCA)),
        ])
    }

    /// The tenant for a request's `X-Team-ID` and `X-Bundle-ID`.
    func tenant(teamID: String, bundleID: String) -> Tenant? {
        tenants[teamID + "." + bundleID]
    }

    /// The tenant for the `X-Team-ID` and `X-Bundle-ID` value ranges of `headers`.
    func tenant(team: Range<Int>, bundle: Range<Int>, in headers: HTTPFields) -> Tenant? {
        tenantIndex.tenant(team: team, bundle: bundle, in: headers)
    }
}

/// Holds the snapshot in force; workers read it at request start.
final class SnapshotStore: SnapshotSource, Sendable {
    private let current: Locked<GatewaySnapshot>

    init(_ snapshot: GatewaySnapshot) {
        current = Locked(snapshot)
    }

    var snapshot: GatewaySnapshot {
        current.withLock { $0 }
    }

    func replace(_ snapshot: GatewaySnapshot) {
        current.withLock { $0 = snapshot }
    }
}
