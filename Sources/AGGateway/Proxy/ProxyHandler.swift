import AGConfig
import AGFormats
import AGJOSE
import AGHTTP
import Foundation

/// The reverse proxy (DESIGN section 6): every public request no gateway endpoint claims.
///
/// Steps, each either answering or handing on to the next:
/// 1. `handle`: the tenant from `X-Team-ID` + `X-Bundle-ID`, or when those are absent from
///    the verified token's `team_id`/`bundle_id`; then the tenant's longest matching route.
/// 2. `authenticate` (routes with `auth: required`): token, signature (cached per worker),
///    time, issuer, tenant, audience, revocation.
/// 3. `admit`: the one place where the tenant's `api` rate-limit bucket belongs.
/// 4. `forward`: headers rebuilt (anti-spoofing, claims, `X-Forwarded-*`), request and response
///    streamed through the worker's `UpstreamPool`, upstream failures answered.
///
/// Nothing reaches the upstream before step 4, so a refused request is never forwarded at all.
struct ProxyHandler {
    unowned let worker: Worker

    // MARK: 1. Tenant and route

    func handle(_ context: RequestContext) {
        context.route = "proxy"
        guard let path = ProxyPath.normalizedForMatching(context.request.path) else {
            context.fail(.badRequest("the request path is not accepted by the proxy",
                                     hint: "no dot segments, encoded slashes or backslashes"))
            return
        }
        let headers = context.request.headers
        guard let teamID = headers[.xTeamID], let bundleID = headers[.xBundleID] else {
            routeByToken(context, path: path)
            return
        }
        dispatch(context, tenant: context.snapshot.tenant(teamID: teamID, bundleID: bundleID), path: path, presented: nil)
    }

    /// The route of `tenant` matching `path` decides: anonymous routes go straight to
    /// admission, the others through the token check (reusing `presented` when it came in the
    /// tenant's own token header).
    private func dispatch(_ context: RequestContext, tenant: Tenant?, path: String, presented: (String, VerifiedToken)?) {
        guard let tenant, let proxy = tenant.proxy, let route = proxy.routes.match(path) else {
            context.fail(.routeNotFound)
            return
        }
        context.tenant = tenant
        if route.auth == .anonymous {
            admit(context, tenant: tenant, proxy: proxy, token: nil)
        } else {
            authenticate(context, tenant: tenant, proxy: proxy,
                         presented: proxy.headers.tokenHeader.equalsIgnoringASCIICase("Authorization") ? presented : nil)
        }
    }

    /// Without tenant headers the token names the tenant. Only `Authorization` is read here:
    /// a tenant's own `token.header` is known only once the tenant is.
    private func routeByToken(_ context: RequestContext, path: String) {
        let presented: (String, VerifiedToken)
        do throws(ProxyAuthFailure) {
            let token = try BearerToken.extract(from: context.request.headers, header: "Authorization")
            presented = (token, try verifiedToken(token, context))
        } catch .missing {
            context.fail(.routeNotFound)
            return
        } catch {
            context.fail(error.error)
            return
        }
        dispatch(context, tenant: presented.1.appID.flatMap { context.snapshot.tenants[$0] }, path: path, presented: presented)
    }

    // MARK: 2. Token

    /// Checks the token; on success continues with `admit`, else answers the contract error.
    /// `presented` is a token already found and verified while resolving the tenant.
    private func authenticate(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy,
                              presented: (String, VerifiedToken)?) {
        let token: VerifiedToken
        let tokens = context.snapshot.gateway.tokens
        do throws(ProxyAuthFailure) {
            if let presented {
                token = presented.1
            } else {
                token = try verifiedToken(try BearerToken.extract(from: context.request.headers, header: proxy.headers.tokenHeader),
                                          context)
            }
            try TokenClaimsPolicy(issuer: tokens.issuer, leeway: tokens.leeway.seconds)
                .check(token, teamID: tenant.config.teamID, bundleID: tenant.config.bundleID,
                       audience: tenant.config.token.audience, now: Date().timeIntervalSince1970)
        } catch {
            context.fail(error.error)
            return
        }
        checkRevocation(context, tenant: tenant, proxy: proxy, token: token)
    }

    /// The token for `text`: from this worker's cache, or verified now and cached.
    private func verifiedToken(_ text: String, _ context: RequestContext) throws(ProxyAuthFailure) -> VerifiedToken {
        let now = Date().timeIntervalSince1970
        let leeway = context.snapshot.gateway.tokens.leeway.seconds
        let cache = worker.tokenCache
        let generation = context.snapshot.generation
        if let cached = cache.lookup(text, generation: generation, now: now, leeway: leeway) {
            worker.metrics.increment("attestgate_token_cache_hits_total")
            return cached
        }
        worker.metrics.increment("attestgate_token_cache_misses_total")
        let jwt: VerifiedJWT
        do {
            jwt = try context.snapshot.tokenKeys.verifier.verify(text)
        } catch {
            throw .invalid(Self.describe(error))
        }
        let token = try VerifiedToken(jwt)
        guard now < token.expiresAt + leeway else { throw .expired }
        cache.insert(text, token, generation: generation)
        return token
    }

    /// Refuses revoked devices. The in-memory set answers for every request; Redis is asked
    /// only when this worker has not yet checked the token under the current subscription
    /// epoch (see `RevocationWatcher`).
    private func checkRevocation(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken) {
        guard let keyID = token.keyID else { return context.fail(.tokenInvalid("the token names no device")) }
        let revocations = worker.revocations
        guard !revocations.isRevoked(appID: tenant.appID, keyID: keyID) else { return context.fail(.deviceRevoked) }
        let epoch = revocations.epoch
        guard token.revocationCheckedEpoch != epoch else {
            admit(context, tenant: tenant, proxy: proxy, token: token)
            return
        }
        let worker = self.worker
        worker.redis.send(["HGET", DeviceStore.deviceKey(tenant, keyID), "rev"]) { result in
            switch result {
            case .success(let value) where value.string == "1":
                revocations.markRevoked(appID: tenant.appID, keyID: keyID)
            case .success:
                token.revocationCheckedEpoch = max(token.revocationCheckedEpoch, epoch)
            case .failure:
                // Fail open, unchecked: the next request with this token asks again.
                worker.metrics.increment("attestgate_revocation_check_errors_total")
            }
            // A revoke message may have arrived while the reply was on its way.
            guard !revocations.isRevoked(appID: tenant.appID, keyID: keyID) else { return context.fail(.deviceRevoked) }
            ProxyHandler(worker: worker).admit(context, tenant: tenant, proxy: proxy, token: token)
        }
    }

    // MARK: 3. Admission

    /// Authentication passed (or the route needs none): the tenant `api` bucket decides, with
    /// `rate_limits.on_store_error` while Redis is down. Its `X-RateLimit-*` headers are copied
    /// onto the proxied response too.
    func admit(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken?) {
        context.rateLimit(.api, tenant: tenant) {
            self.forward(context, tenant: tenant, proxy: proxy, token: token)
        }
    }

    // MARK: 4. Forwarding

    /// Sends the request upstream with rebuilt headers and streams the answer back.
    func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, token: VerifiedToken?) {
        let request = context.request
        let server = context.snapshot.gateway.server
        let policy = proxy.headers
        var injected: [(name: String, value: String)] = []
        if let token {
            if let cached = token.injectedHeaders {
                injected = cached
            } else {
                injected = policy.mapper.headers(for: token.claims)
                if let payloadHeader = policy.payloadHeader { injected.append((payloadHeader, token.encodedPayload)) }
                token.injectedHeaders = injected
            }
        }
        let hop = ClientHop(peerAddress: request.remoteAddress,
                            peerTrusted: Self.isTrusted(request.remoteAddress, server.trustedProxies),
                            requestID: context.requestID)
        let requestID = context.requestID
        let extra = context.extraHeaders
        let worker = self.worker
        worker.upstreams.forward(request, to: proxy.target,
                                 timeouts: UpstreamTimeouts(connect: server.timeouts.upstreamConnect,
                                                            response: server.timeouts.upstreamResponse),
                                 maxBodyBytes: server.maxProxyBodyBytes,
                                 writeFields: { ForwardHeaders.request(request.headers, policy: policy, hop: hop, injected: injected, into: &$0) },
                                 responseFields: { ForwardHeaders.response($0, requestID: requestID, extra: extra, into: &$1) }) {
            outcome in
            switch outcome {
            case .completed(let status, let upstreamTime, _):
                context.upstreamSeconds = upstreamTime.seconds
                context.finished(status: status)
            case .interrupted(let error, let status, let upstreamTime, _):
                context.upstreamSeconds = upstreamTime.seconds
                if error != .clientAborted { Self.countUpstreamError(worker, tenant, error) }
                context.finished(status: status)
            case .failed(.clientAborted):
                context.finished(status: UpstreamError.clientAborted.status)
            case .failed(let error):
                Self.countUpstreamError(worker, tenant, error)
                context.fail(Self.answer(for: error, limit: server.maxProxyBodyBytes))
            }
        }
    }

    /// The contract error for an upstream failure that happened before any response byte.
    static func answer(for error: UpstreamError, limit: Int) -> GatewayError {
        switch error {
        case .connectFailed, .connectionReset, .invalidResponse, .clientAborted: .upstreamUnavailable
        case .timeout: .upstreamTimeout
        case .bodyTooLarge: .payloadTooLarge(limit: limit)
        case .clientBodyMalformed(let why): .badRequest("malformed request body: \(why)")
        }
    }

    private static func countUpstreamError(_ worker: Worker, _ tenant: Tenant, _ error: UpstreamError) {
        let kind: String
        switch error {
        case .connectFailed: kind = "connect_failed"
        case .connectionReset: kind = "connection_reset"
        case .invalidResponse: kind = "invalid_response"
        case .timeout: kind = "timeout"
        case .bodyTooLarge: kind = "body_too_large"
        case .clientBodyMalformed: kind = "client_body_malformed"
        case .clientAborted: kind = "client_aborted"
        }
        worker.metrics.increment("attestgate_upstream_errors_total{tenant=\"\(tenant.appID)\",error=\"\(kind)\"}")
    }

    private static func isTrusted(_ peer: String, _ proxies: [CIDRBlock]) -> Bool {
        guard !proxies.isEmpty, let address = IPAddress(peer) else { return false }
        return proxies.contains { $0.contains(address) }
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
