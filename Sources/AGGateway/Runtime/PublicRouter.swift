import AGHTTP

/// Dispatches public-listener requests: gateway endpoints by exact path, the rest to tenants.
struct PublicRouter {
    let services: RouteServices

    func handle(_ request: any ServerExchange) {
        let context = RequestContext(request: request, services: services)
        switch OwnRoute(request.path) {
        case .healthz:
            context.route = "healthz"
            guard allow(context, "GET", "HEAD") else { return }
            context.respond(status: 200, json: #"{"status":"ok"}"#)
        case .readyz:
            context.route = "readyz"
            guard allow(context, "GET", "HEAD") else { return }
            readiness(context)
        case .challenge:
            context.route = "challenge"
            guard allow(context, "GET"), let tenant = context.resolveTenant() else { return }
            ChallengeHandler.handle(context, tenant: tenant)
        case .validate:
            context.route = "validate"
            guard allow(context, "POST"), let tenant = context.resolveTenant() else { return }
            ValidateHandler.handle(context, tenant: tenant)
        case .refresh:
            context.route = "refresh"
            guard allow(context, "POST"), let tenant = context.resolveTenant() else { return }
            RefreshHandler.handle(context, tenant: tenant)
        case .jwks:
            context.route = "jwks"
            guard allow(context, "GET", "HEAD") else { return }
            var headers = HTTPHeaders()
            headers.add("Cache-Control", "public, max-age=300")
            context.respond(status: 200, body: context.snapshot.tokenKeys.jwksBody, contentType: "application/json", headers: headers)
        case nil:
            if let sso = context.snapshot.platformSSO.match(request.path) {
                PlatformSSOHandler.handle(context, service: sso.service, endpoint: sso.endpoint)
            } else {
                ProxyHandler.handle(context)
            }
        }
    }

    /// Answers 405 unless the method is `method` or `other` (two parameters, not a variadic
    /// list: that would be an array per request).
    private func allow(_ context: RequestContext, _ method: String, _ other: String? = nil) -> Bool {
        let received = context.request.method
        if received == method || received == other { return true }
        var error = GatewayError.methodNotAllowed
        error.headers = [("Allow", other.map { method + ", " + $0 } ?? method)]
        context.fail(error)
        return false
    }

    /// Ready when a configuration is loaded (always, once serving) and Redis answers a PING. A
    /// Redis that came back empty is a warning in the body, not a 503: every instance shares
    /// that Redis, so taking them out of rotation would turn lost data into an outage.
    private func readiness(_ context: RequestContext) {
        services.readiness.check { [services] ready in
            guard ready else { return context.fail(.storeUnavailable) }
            context.respond(status: 200, json: ReadinessBody.render(generation: context.snapshot.generation,
                                                                    resets: services.readiness.unacknowledgedResets))
        }
    }
}

extension RequestContext {
    /// Resolves the tenant from `X-Team-ID` and `X-Bundle-ID`; answers the error itself on failure.
    func resolveTenant() -> Tenant? {
        let headers = request.headers
        let selectors: (team: Range<Int>, bundle: Range<Int>)?
        do {
            selectors = try TenantIndex.tenantFields(headers)
        } catch .repeated(let name) {
            fail(.badRequest(TenantIndex.FieldProblem.repeated(name).message))
            return nil
        } catch {
            // One without the other: here both are required.
            selectors = nil
        }
        guard let (team, bundle) = selectors, !team.isEmpty, !bundle.isEmpty else {
            fail(.badRequest("X-Team-ID and X-Bundle-ID headers are required"))
            return nil
        }
        guard let tenant = snapshot.tenant(team: team, bundle: bundle, in: headers) else {
            fail(.unknownTenant)
            return nil
        }
        self.tenant = tenant
        return tenant
    }
}

/// The paths the gateway answers itself (everything else is Platform SSO or proxied).
enum OwnRoute: CaseIterable {
    case healthz, readyz, challenge, validate, refresh, jwks

    var path: String {
        switch self {
        case .healthz: "/healthz"
        case .readyz: "/readyz"
        case .challenge: "/api/v1/attestation/challenge"
        case .validate: "/api/v1/attestation/validate"
        case .refresh: "/api/v1/attestation/refresh"
        case .jwks: "/.well-known/jwks.json"
        }
    }

    /// The route whose path is exactly `path`. The six paths have six different lengths, so
    /// the length picks the one candidate: comparing a path with six literals in turn cost
    /// ~650 instructions per proxied request, a table of them ~190.
    init?(_ path: Substring) {
        let candidate: OwnRoute
        switch path.utf8.count {
        case 8: candidate = .healthz
        case 7: candidate = .readyz
        case 29: candidate = .challenge
        case 28: candidate = .validate
        case 27: candidate = .refresh
        case 22: candidate = .jwks
        default: return nil
        }
        guard path == candidate.path else { return nil }
        self = candidate
    }
}
