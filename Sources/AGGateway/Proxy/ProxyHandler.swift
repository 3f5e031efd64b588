import AGPolicy
import AGFormats
import AGJOSE
import AGHTTP

/// The reverse proxy (DESIGN section 6): every public request no gateway endpoint claims.
///
/// Steps, each either answering or handing on to the next:
/// 1. `handle`: the tenant from `X-Team-ID` + `X-Bundle-ID`, or when those are absent from
///    the verified token's `team_id`/`bundle_id`; then the tenant's longest matching route.
/// 2. `authenticate` (routes with `auth: required`): token, signature (cached per worker),
///    time, issuer, tenant, audience, revocation.
/// 3. `admit`: the one place where the tenant's `api` rate-limit bucket belongs.
/// 4. `forward`: the claim headers, then the `Forwarder` (`UpstreamForwarder`: headers rebuilt
///    with anti-spoofing and `X-Forwarded-*`, bodies streamed, upstream failures answered).
///
/// Nothing reaches the upstream before step 4, so a refused request is never forwarded at all.
enum ProxyHandler {
    // MARK: 1. Tenant and route

    static func handle(_ context: RequestContext) {
        context.route = "proxy"
        guard let path = ProxyPath.normalizedForMatching(context.request.path) else {
            context.fail(.badRequest("the request path is not accepted by the proxy",
                                     hint: "no dot segments, encoded slashes or backslashes"))
            return
        }
        let headers = context.request.headers
        let selectors: (team: Range<Int>, bundle: Range<Int>)?
        do {
            selectors = try TenantIndex.tenantFields(headers)
        } catch {
            context.fail(.badRequest(error.message))
            return
        }
        guard let (team, bundle) = selectors else {
            routeByToken(context, path: path)
            return
        }
        dispatch(context, tenant: context.snapshot.tenant(team: team, bundle: bundle, in: headers), path: path, presented: nil)
    }

    /// The route of `tenant` matching `path` decides: anonymous routes go straight to
    /// admission, the others through the token check (reusing `presented` when it came in the
    /// tenant's own token header, `presentedIn`).
    private static func dispatch(_ context: RequestContext, tenant: Tenant?, path: String, presented: VerifiedToken?,
                                 presentedIn: TokenHeaderName? = nil) {
        guard let tenant, let proxy = tenant.proxy, let route = proxy.routes.match(path) else {
            context.fail(.routeNotFound)
            return
        }
        context.tenant = tenant
        if route.auth == .anonymous {
            admit(context, tenant: tenant, proxy: proxy, token: nil)
        } else {
            let own = presentedIn.map { $0.text.equalsIgnoringASCIICase(proxy.headers.tokenHeader.text) } ?? false
            authenticate(context, tenant: tenant, proxy: proxy, presented: own ? presented : nil)
        }
    }

    /// Without tenant headers the token names the tenant: the first of the snapshot's token
    /// headers (`Authorization`, then the tenants' own `token.header`s) the request carries.
    /// The tenant it names then reads its own header, so a token in another one is missing.
    private static func routeByToken(_ context: RequestContext, path: String) {
        for header in context.snapshot.tokenHeaders {
            let presented: VerifiedToken
            do throws(ProxyAuthFailure) {
                presented = try verifiedToken(try BearerToken.range(in: context.request.headers, header: header),
                                              context, now: context.services.time.nowSeconds)
            } catch .missing {
                continue
            } catch {
                context.fail(error.error)
                return
            }
            let tenant = presented.appID.flatMap { context.snapshot.tenants[$0] }
            return dispatch(context, tenant: tenant, path: path, presented: presented, presentedIn: header)
        }
        context.fail(.routeNotFound)
    }

    // MARK: 2. Token

    /// Checks the token; on success continues with `admit`, else answers the contract error.
    /// `presented` is a token already found and verified while resolving the tenant.
    private static func authenticate(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy,
                              presented: VerifiedToken?) {
        let token: VerifiedToken
        // Read once for the cache and the claims (each read copies the clock's existential).
        let now = context.services.time.nowSeconds
        do throws(ProxyAuthFailure) {
            if let presented {
                token = presented
            } else {
                token = try verifiedToken(try BearerToken.range(in: context.request.headers, header: proxy.headers.tokenHeader),
                                          context, now: now)
            }
            let policy = context.snapshot.tokenClaims
            if token.claimsCheckedFor === tenant {
                try policy.checkTimes(expiresAt: token.verified.expiresAt, notBefore: token.verified.notBefore, now: now)
            } else {
                try policy.check(token.verified, teamID: tenant.config.teamID, bundleID: tenant.config.bundleID,
                                 audience: tenant.config.token.audience, now: now)
                token.claimsCheckedFor = tenant
            }
        } catch {
            context.fail(error.error)
            return
        }
        checkRevocation(context, tenant: tenant, proxy: proxy, token: token)
    }

    /// The token at `range` of the request head's bytes: from this worker's cache (no `String`
    /// made of it), or verified now and cached.
    private static func verifiedToken(_ range: Range<Int>, _ context: RequestContext, now: Double) throws(ProxyAuthFailure) -> VerifiedToken {
        let leeway = context.snapshot.tokenClaims.leeway
        let cache = context.services.tokenCache
        let generation = context.snapshot.generation
        let head = context.request.headers.storage
        if let cached = cache.lookup(range, of: head, generation: generation, now: now, leeway: leeway) {
            context.services.metrics.increment(.tokenCacheHits)
            return cached
        }
        context.services.metrics.increment(.tokenCacheMisses)
        let jwt: VerifiedJWT
        do {
            jwt = try context.snapshot.tokenKeys.verifier.verify(String(decoding: head[range], as: UTF8.self))
        } catch {
            throw .invalid(Self.describe(error))
        }
        let token = try VerifiedToken(jwt)
        guard now < token.expiresAt + leeway else { throw .expired }
        cache.insert(range, of: head, token, generation: generation)
        return token
    }

    /// Refuses at once the tokens of a device this worker heard was revoked (the events
    /// stream); the device record itself is checked in Redis at each change of the tenant's
    /// device epoch (`admit`).
    private static func checkRevocation(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken) {
        guard let keyID = token.keyID else { return context.fail(.tokenInvalid("the token names no device")) }
        guard !context.services.revocations.isRevoked(appID: tenant.appID, keyID: keyID) else {
            context.services.metrics.increment(RefusedDeviceSeries.revoked)
            return context.fail(.deviceRevoked)
        }
        admit(context, tenant: tenant, proxy: proxy, token: token)
    }

    // MARK: 3. Admission

    /// Authentication passed (or the route needs none): the tenant `api` bucket decides, with
    /// `rate_limits.on_store_error` while Redis is down. Its `X-RateLimit-*` headers are copied
    /// onto the proxied response too. With a token, the device record must be in good standing
    /// at the tenant's current device epoch (read again only when the epoch moved): revoked or
    /// gone → 403 `forbidden`; Redis unreachable → `proxy.unverified_token_policy` (`deny`: 503
    /// `store_unavailable`). In the steady state neither costs a Redis call.
    static func admit(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken?) {
        guard let token, let keyID = token.keyID else {
            context.rateLimit(.api, tenant: tenant) {
                forward(context, tenant: tenant, proxy: proxy, token: token)
            }
            return
        }
        if let admitted = context.rateLimitAPINow(tenant: tenant, token: token, keyID: keyID) {
            if admitted { forward(context, tenant: tenant, proxy: proxy, token: token) }
            return
        }
        context.rateLimitAPI(tenant: tenant, token: token, keyID: keyID) {
            forward(context, tenant: tenant, proxy: proxy, token: token)
        }
    }

    // MARK: 4. Forwarding

    /// The claim headers for `token` (computed once per cached token), then the forwarder.
    static func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken?) {
        var injected = InjectedHeaders.none
        if let token {
            if let cached = token.injectedHeaders {
                injected = cached
            } else {
                var fields = proxy.headers.mapper.headers(for: token.claims)
                if let payloadHeader = proxy.headers.payloadHeader { fields.append((payloadHeader, token.encodedPayload)) }
                injected = InjectedHeaders(fields)
                token.injectedHeaders = injected
            }
        }
        context.services.forwarder.forward(context, tenant: tenant, proxy: proxy, injected: injected)
    }

    private static func describe(_ error: JOSEError) -> String {
        switch error {
        case .unsupportedAlgorithm, .algorithmMismatch: "the token's algorithm is not accepted"
        case .unknownKeyID: "the token's key is unknown"
        case .invalidSignature: "the token's signature does not verify"
        case .unexpectedType: "the token is not a JWT"
        case .malformed, .unsupportedCriticalHeader, .invalidKey, .signingFailed: "the token is malformed"
        }
    }
}
