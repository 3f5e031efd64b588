import AGEventLoop
import AGCrypto
import AGHTTP

/// Dispatches admin-listener requests. Every call needs `Authorization: Bearer <admin token>`.
struct AdminRouter {
    let services: RouteServices

    func handle(_ request: any ServerExchange) {
        let context = RequestContext(request: request, services: services)
        context.route = "admin"
        guard authorized(context) else {
            var error = GatewayError.unauthorized
            error.headers = [("WWW-Authenticate", "Bearer")]
            context.fail(error)
            return
        }
        let path = request.path
        switch (context.adminMethod, path) {
        case ("GET", "/metrics"):
            context.route = "metrics"
            context.respond(status: 200, body: Array(services.metricsText().utf8),
                            contentType: "text/plain; version=0.0.4; charset=utf-8")
        case ("POST", "/admin/v1/reload"):
            context.route = "admin_reload"
            reload(context)
        case ("POST", "/admin/v1/store/acknowledge-reset"):
            context.route = "admin_store"
            context.respond(status: 200, json: "{\"acknowledged\":\(services.readiness.acknowledgeResets())}")
        case ("GET", "/admin/v1/tenants"):
            context.route = "admin_tenants"
            AdminTenantHandlers.listTenants(context)
        case ("GET", "/admin/v1/tiers"):
            context.route = "admin_tiers"
            AdminTenantHandlers.listTiers(context)
        case ("PUT", _) where path.hasPrefix("/admin/v1/tiers/"):
            context.route = "admin_tiers"
            AdminTenantHandlers.setTier(context, name: String(path.dropFirst("/admin/v1/tiers/".count)))
        case ("DELETE", _) where path.hasPrefix("/admin/v1/tiers/"):
            context.route = "admin_tiers"
            AdminTenantHandlers.clearTier(context, name: String(path.dropFirst("/admin/v1/tiers/".count)))
        default:
            if path.hasPrefix("/admin/v1/tenants/") {
                tenantCall(context, path.dropFirst("/admin/v1/tenants/".count).split(separator: "/", omittingEmptySubsequences: false))
            } else {
                Self.refuse(context, allowed: Self.methods(path))
            }
        }
    }

    /// The methods each admin path outside `/admin/v1/tenants/{appId}` answers; none for a
    /// path that is not there.
    static func methods(_ path: Substring) -> [String] {
        switch path {
        case "/metrics", "/admin/v1/tenants", "/admin/v1/tiers": ["GET"]
        case "/admin/v1/reload", "/admin/v1/store/acknowledge-reset": ["POST"]
        default: path.hasPrefix("/admin/v1/tiers/") ? ["PUT", "DELETE"] : []
        }
    }

    /// The methods each path under `/admin/v1/tenants/{appId}/` answers (`rest` is what
    /// follows the App ID); none for a path that is not there. Platform SSO's paths say
    /// their own.
    static func tenantMethods(_ rest: [Substring]) -> [String] {
        switch rest.count {
        case 0: ["GET"]
        case 1 where rest[0] == "tier": ["PUT", "DELETE"]
        case 1 where rest[0] == "usage": ["GET"]
        case 2 where rest[0] == "keys": ["PUT", "GET"]
        case 3 where rest[0] == "keys" && rest[2] == "revoke": ["POST"]
        case 3 where rest[0] == "subjects" && rest[2] == "subscription": ["PUT"]
        default: []
        }
    }

    /// A request no case took: 405 with `Allow` on a path that answers other methods (as on
    /// the public listener), else 404.
    private static func refuse(_ context: RequestContext, allowed: [String]) {
        guard !allowed.isEmpty else { return context.fail(.notFound) }
        context.fail(.methodNotAllowed(allowing: allowed))
    }

    /// `/admin/v1/tenants/{appId}/…`
    private func tenantCall(_ context: RequestContext, _ parts: [Substring]) {
        guard let appID = parts.first, let tenant = context.snapshot.tenants[String(appID)] else {
            context.fail(GatewayError(status: 404, code: "not_found", message: "no tenant with this App ID"))
            return
        }
        context.tenant = tenant
        let method = context.adminMethod
        switch (method, Array(parts.dropFirst())) {
        case ("GET", let rest) where rest.isEmpty:
            context.route = "admin_tenants"
            AdminTenantHandlers.showTenant(context, tenant)
        case ("PUT", let rest) where rest == ["tier"]:
            context.route = "admin_tier"
            AdminTenantHandlers.setTenantTier(context, tenant)
        case ("DELETE", let rest) where rest == ["tier"]:
            context.route = "admin_tier"
            AdminTenantHandlers.clearTenantTier(context, tenant)
        case ("PUT", let rest) where rest.count == 2 && rest[0] == "keys",
             ("GET", let rest) where rest.count == 2 && rest[0] == "keys",
             ("POST", let rest) where rest.count == 3 && rest[0] == "keys" && rest[2] == "revoke":
            context.route = "admin_keys"
            guard let keyID = AdminDeviceHandlers.canonicalKeyID(rest[1]) else {
                context.fail(AdminDeviceHandlers.keyIDInvalid)
                return
            }
            switch method {
            case "PUT": AdminDeviceHandlers.importKey(context, tenant: tenant, keyID: keyID)
            case "GET": AdminDeviceHandlers.readKey(context, tenant: tenant, keyID: keyID)
            default: AdminDeviceHandlers.revoke(context, tenant: tenant, keyID: keyID)
            }
        case ("PUT", let rest) where rest.count == 3 && rest[0] == "subjects" && rest[2] == "subscription":
            context.route = "admin_subscription"
            AdminDeviceHandlers.setSubscription(context, tenant: tenant, subjectID: rest[1])
        case (_, let rest) where rest.first == "psso":
            context.route = "admin_psso"
            AdminPlatformSSOHandlers.handle(context, tenant: tenant, path: Array(rest.dropFirst()))
        case ("GET", let rest) where rest == ["usage"]:
            context.route = "admin_usage"
            AdminDeviceHandlers.usage(context, tenant: tenant)
        case (_, let rest):
            Self.refuse(context, allowed: Self.tenantMethods(rest))
        }
    }

    /// `Authorization: Bearer <admin token>`, the scheme in any case and followed by one or
    /// more spaces (RFC 9110 sections 11.1 and 11.4); the token compared in constant time. The
    /// field sent twice is refused, whichever copy holds the token (a proxy in front may read
    /// the other one; nginx refuses it too).
    private func authorized(_ context: RequestContext) -> Bool {
        let fields = context.request.headers.values("Authorization")
        guard let expected = context.snapshot.adminToken, fields.count == 1, let header = fields.first else {
            return false
        }
        let value = Array(header.utf8)
        guard value.count > 7, String(decoding: value.prefix(7), as: UTF8.self).lowercased() == "bearer " else {
            return false
        }
        let presented = value.dropFirst(7).drop { $0 == 0x20 }
        return constantTimeEquals(Array(presented), Array(expected.utf8))
    }

    /// Reloads off the event loop (on the control thread), then answers on this loop.
    private func reload(_ context: RequestContext) {
        services.reloader.reload { outcome in
            switch outcome {
            case .success(let generation):
                context.respond(status: 200, json: "{\"status\":\"reloaded\",\"generation\":\(generation)}")
            case .failure(let error):
                var gatewayError = GatewayError(status: 400, code: "config_invalid",
                                                message: "configuration rejected; the previous one stays in force")
                gatewayError.hint = error.lines.joined(separator: "\n")
                context.fail(gatewayError)
            }
        }
    }
}

extension RequestContext {
    /// The method an admin call is dispatched on: HEAD is answered as GET, without the body
    /// (RFC 9110 section 9.1: a general-purpose server supports GET and HEAD; the answer's
    /// writer leaves the body out of a HEAD's answer and keeps its `Content-Length`).
    var adminMethod: String { request.method == "HEAD" ? "GET" : request.method }
}

extension GatewayError {
    /// 405 with `Allow` naming `methods`, and HEAD beside GET (`RequestContext.adminMethod`).
    static func methodNotAllowed(allowing methods: [String]) -> GatewayError {
        var error = GatewayError.methodNotAllowed
        let allowed = methods.flatMap { $0 == "GET" ? ["GET", "HEAD"] : [$0] }
        error.headers = [("Allow", allowed.joined(separator: ", "))]
        return error
    }
}
