import AGConfig
import AGJOSE
import AGPlatformSSO

/// One tenant's Platform SSO endpoints as requests see them, built once per snapshot: the
/// verifier and response builder for its settings, and its metric series.
final class PlatformSSOService: Sendable {
    let tenant: Tenant
    let config: PlatformSSOConfig
    let verifier: RefreshRequestVerifier
    let builder: LoginResponseBuilder
    /// `attestgate_psso_refreshes_total{tenant,outcome}`, rendered per outcome.
    private let refreshSeries: [PlatformSSOOutcome: String]
    /// `attestgate_psso_nonces_issued_total{tenant}`.
    let noncesIssued: String

    init(tenant: Tenant, config: PlatformSSOConfig, signer: JWTSigner) {
        self.tenant = tenant
        self.config = config
        let settings = PlatformSSOSettings(
            clientID: config.clientID, audiences: config.audiences, issuer: config.issuer,
            nonceClaimName: config.nonceClaimName, clockSkew: config.clockSkew.components.seconds,
            idTokenLifetime: config.idTokenTTL.components.seconds)
        verifier = RefreshRequestVerifier(settings: settings)
        builder = LoginResponseBuilder(settings: settings, signer: signer)
        var series: [PlatformSSOOutcome: String] = [:]
        for outcome in PlatformSSOOutcome.allCases {
            series[outcome] = "attestgate_psso_refreshes_total{tenant=\"\(tenant.appID)\",outcome=\"\(outcome.rawValue)\"}"
        }
        refreshSeries = series
        noncesIssued = "attestgate_psso_nonces_issued_total{tenant=\"\(tenant.appID)\"}"
    }

    /// The refresh counter series for `outcome`.
    func series(_ outcome: PlatformSSOOutcome) -> String { refreshSeries[outcome]! }
}

/// Which Platform SSO endpoint a path names.
enum PlatformSSOEndpoint: Sendable, Equatable {
    case nonce
    /// `{prefix}/token` and `{prefix}/refresh`: the same handler, told apart only in logs.
    case token(route: String)

    var route: String {
        switch self {
        case .nonce: "psso_nonce"
        case .token(let route): route
        }
    }
}

/// Every tenant's Platform SSO paths, by exact path: Macs send no tenant headers, so the path
/// alone names the tenant (prefixes are unique and overlap nothing else; `AGConfig` checks).
struct PlatformSSORoutes: Sendable {
    private let byPath: [String: (service: PlatformSSOService, endpoint: PlatformSSOEndpoint)]

    init(tenants: some Sequence<Tenant>, signer: JWTSigner) {
        var byPath: [String: (service: PlatformSSOService, endpoint: PlatformSSOEndpoint)] = [:]
        for tenant in tenants {
            guard let config = tenant.config.platformSSO else { continue }
            let service = PlatformSSOService(tenant: tenant, config: config, signer: signer)
            byPath[config.pathPrefix + "/nonce"] = (service, .nonce)
            byPath[config.pathPrefix + "/token"] = (service, .token(route: "psso_token"))
            byPath[config.pathPrefix + "/refresh"] = (service, .token(route: "psso_refresh"))
        }
        self.byPath = byPath
    }

    /// The endpoint at exactly `path`. Cheap for the proxied requests that are not one: no
    /// table, or a last segment other than the three, costs no hashing.
    func match(_ path: Substring) -> (service: PlatformSSOService, endpoint: PlatformSSOEndpoint)? {
        guard !byPath.isEmpty, Self.endsInEndpoint(path) else { return nil }
        return byPath[String(path)]
    }

    private static let lastSegments = ["/token", "/nonce", "/refresh"].map { Array($0.utf8) }

    /// Whether `path` ends in one of the three last segments, compared as bytes (a generic
    /// `hasSuffix` cost a proxied request ~3,000 instructions).
    private static func endsInEndpoint(_ path: Substring) -> Bool {
        path.utf8.withContiguousStorageIfAvailable { bytes in
            lastSegments.contains { segment in
                bytes.count > segment.count && bytes[(bytes.count - segment.count)...].elementsEqual(segment)
            }
        } ?? (path.hasSuffix("/token") || path.hasSuffix("/nonce") || path.hasSuffix("/refresh"))
    }
}

/// What became of a Platform SSO token call, for `attestgate_psso_refreshes_total`.
enum PlatformSSOOutcome: String, Sendable, CaseIterable {
    case ok
    case invalidRequest = "invalid_request"
    case unsupportedGrantType = "unsupported_grant_type"
    case rateLimited = "rate_limited"
    case unavailable
    case serverError = "server_error"
    case signatureInvalid = "signature_invalid"
    case deviceUnknown = "device_unknown"
    case deviceDisabled = "device_disabled"
    case nonceUnknown = "nonce_unknown"
    case nonceExpired = "nonce_expired"
    case nonceUsed = "nonce_used"
    case refreshTokenUnknown = "refresh_token_unknown"
    case refreshTokenExpired = "refresh_token_expired"
    case refreshTokenRevoked = "refresh_token_revoked"
    case refreshTokenReused = "refresh_token_reused"
}
