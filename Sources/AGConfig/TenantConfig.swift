import AGYAML
public import AGFormats
public import AGAppAttest
/// The validated contents of one `tenants/<name>.yaml`.
public struct TenantConfig: Sendable, Hashable {
    /// File name without extension.
    public let name: String
    public let sourcePath: String
    /// 10 uppercase letters or digits.
    public let teamID: String
    public let bundleID: String
    /// `TEAMID.bundle.id`: how requests (`X-Team-ID` + `X-Bundle-ID`) and the admin API name the tenant.
    public let appID: String
    /// Tier from the file; the admin API may override it at runtime.
    public let tier: String
    public let environment: AppAttestEnvironment
    public let token: TenantTokenConfig
    /// Static `custom_claims` object carried in every token.
    public let customClaims: [String: JSONValue]
    /// `nil` when the tenant only uses attestation (no routes).
    public let upstream: UpstreamURL?
    /// `upstream_ca`: the only roots an https upstream's certificate may chain to (resolved
    /// path, checked readable); `nil` trusts the system store.
    public let upstreamCA: UpstreamCAFile?
    /// In file order.
    public let routes: [RouteConfig]
    public let forward: ForwardConfig
    public let platformSSO: PlatformSSOConfig?
}

/// `upstream_ca`: a PEM file of CA certificates; parsed when the snapshot is built.
public struct UpstreamCAFile: Sendable, Hashable {
    public let path: String
    public let location: ConfigLocation
}

/// `token`: per-tenant token settings.
public struct TenantTokenConfig: Sendable, Hashable {
    public let audience: String
    public let ttl: Duration
    /// Request header carrying the token on proxied calls: `Bearer <jwt>`, or for a header other
    /// than `Authorization` also the raw token.
    public let header: String
}

/// Whether a route needs a token.
public enum RouteAuth: String, Sendable, Hashable, CaseIterable {
    case required
    /// Spelled `none` in YAML.
    case anonymous = "none"
}

/// One entry of `routes`: a path prefix proxied to the tenant upstream.
public struct RouteConfig: Sendable, Hashable {
    public let prefix: String
    public let auth: RouteAuth
}

/// One verified claim forwarded as a header.
public struct ClaimHeader: Sendable, Hashable {
    /// Dotted path into the token payload, e.g. `custom_claims.subscription.tier`.
    public let claimPath: [String]
    public let header: String
}

/// `forward`: what verified claims the upstream receives.
public struct ForwardConfig: Sendable, Hashable {
    /// In file order (or the default order).
    public let claims: [ClaimHeader]
    /// Header carrying the base64url payload JSON; `nil` when disabled.
    public let payloadHeader: String?
    public let forwardAuthorization: Bool

    /// Used when a tenant file has no `forward.payload_header`.
    public static let defaultPayloadHeader = "X-Attest-Claims"

    /// Used when a tenant file has no `forward.claims`.
    public static let defaultClaims: [ClaimHeader] = [
        ClaimHeader(claimPath: ["sub"], header: "X-Attest-Key-Id"),
        ClaimHeader(claimPath: ["team_id"], header: "X-Attest-Team-Id"),
        ClaimHeader(claimPath: ["bundle_id"], header: "X-Attest-Bundle-Id"),
        ClaimHeader(claimPath: ["subject_id"], header: "X-Attest-Subject-Id"),
    ]
}

/// `platform_sso`: the macOS Platform SSO refresh endpoints of a tenant (DESIGN section 11).
public struct PlatformSSOConfig: Sendable, Hashable {
    /// `POST {pathPrefix}/nonce`, `/token` and `/refresh`; starts with `/`, no trailing `/`,
    /// unique across tenants and outside every route and gateway path.
    public let pathPrefix: String
    /// Line of `path_prefix`, for the problems found across tenant files.
    public let pathPrefixLine: Int
    /// The OpenID client id: a request's `client_id` and `iss`, the id_token's `aud`.
    public let clientID: String
    /// Line of `client_id`, for the problems found across tenant files.
    public let clientIDLine: Int
    /// The absolute URLs a request's `aud` may name (the token and refresh URLs the Macs are
    /// configured with), in file order.
    public let audiences: [String]
    /// The id_token's `iss` (default `tokens.issuer`).
    public let issuer: String
    /// The id_token's lifetime (`expires_in`), whole seconds.
    public let idTokenTTL: Duration
    /// Absolute lifetime of a refresh-token family, from the login that minted it.
    public let refreshTokenTTL: Duration
    /// A family expires after this long without a refresh.
    public let refreshTokenIdle: Duration
    /// How long after a rotation the replaced token may still be presented once more (a lost
    /// response), as long as its successor is unused; zero turns the window off.
    public let reuseGrace: Duration
    /// How long a server nonce stays usable (single use).
    public let nonceTTL: Duration
    /// The refresh request claim carrying the server nonce.
    public let nonceClaimName: String
    /// Tolerance on the request's `iat` and `exp`.
    public let clockSkew: Duration
}
