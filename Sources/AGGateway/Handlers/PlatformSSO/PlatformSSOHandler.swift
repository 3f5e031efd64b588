import AGConfig
import AGFormats
import AGHTTP
import AGPlatformSSO
import AGPolicy

/// The Platform SSO endpoints of one tenant (DESIGN section 11), found by path alone:
/// `POST {prefix}/nonce` here, `POST {prefix}/token` and `{prefix}/refresh` in
/// `PlatformSSOTokenHandler`. Every answer is OAuth-shaped, echoes `client-request-id` and
/// carries `Cache-Control: no-store`.
enum PlatformSSOHandler {
    static func handle(_ context: RequestContext, service: PlatformSSOService, endpoint: PlatformSSOEndpoint) {
        context.route = endpoint.route
        context.tenant = service.tenant
        context.echoClientRequestID()
        guard context.request.method == "POST" else {
            var headers = HTTPHeaders()
            headers.add("Allow", "POST")
            context.fail(OAuthError(status: 405, code: "invalid_request", reason: "only POST is served here"), headers: headers)
            return
        }
        switch endpoint {
        case .nonce: nonce(context, service: service)
        case .token: PlatformSSOTokenHandler.handle(context, service: service)
        }
    }

    /// `grant_type=srv_challenge` → `{"Nonce": …}`: the form is judged first (a malformed one
    /// takes no rate-limit token), then the tenant's `challenge` bucket and the per-IP
    /// `psso_nonce` bucket, then the nonce is stored. The tenant bucket bounds the nonces held
    /// in Redis whatever the number of client addresses (an IPv6 /64, or `X-Forwarded-For`
    /// behind a trusted proxy, has any number of them), as it does the challenges.
    private static func nonce(_ context: RequestContext, service: PlatformSSOService) {
        context.collectForm(refuse: { context.fail($0) }) { body in
            do throws(OAuthError) {
                _ = try PlatformSSONonceForm(body: body)
            } catch {
                return context.fail(error)
            }
            let tenant = service.tenant
            let checks = [tenant.bucket(.challenge, tier: context.effectiveTier(tenant)),
                          BucketCheck.ip(context.clientIP, .pssoNonce, limitPerMinute: context.snapshot.gateway.ipLimits.pssoNonce)]
            context.services.limiter.check(checks, fallback: .refuse) { outcome in
                if let refusal = context.oauthRefusal(for: outcome, tenant: service.tenant) { return context.fail(refusal) }
                context.services.platformSSO.issueNonce(tenant: service.tenant, ttl: service.config.nonceTTL) { result in
                    switch result {
                    case .failure(let failure):
                        context.fail(context.oauthStoreFailed(failure))
                    case .success(let nonce):
                        context.services.metrics.increment(service.noncesIssued)
                        context.respond(status: 200, json: JSONValue.object(["Nonce": .string(nonce)]).serializedString())
                    }
                }
            }
        }
    }
}
