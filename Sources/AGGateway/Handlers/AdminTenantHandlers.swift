import AGConfig
import AGFormats
import AGHTTP

/// Admin calls on tenants and tiers: effective configuration, runtime tier changes.
enum AdminTenantHandlers {
    static func limitsJSON(_ tier: RateTier) -> JSONValue {
        let madLimit: JSONValue = switch tier.madLimit {
        case .limited(let value): .integer(Int64(value))
        case .unlimited: "unlimited"
        }
        return ["attest": .integer(Int64(tier.attest)), "challenge": .integer(Int64(tier.challenge)),
                "api": .integer(Int64(tier.api)), "mad_limit": madLimit]
    }

    /// A tenant's effective configuration (nothing secret).
    static func tenantJSON(_ context: RequestContext, _ tenant: Tenant) -> [String: JSONValue] {
        let config = tenant.config
        let tier = context.effectiveTier(tenant)
        var json: [String: JSONValue] = [
            "appId": .string(config.appID), "teamId": .string(config.teamID), "bundleId": .string(config.bundleID),
            "file": .string(config.sourcePath), "environment": .string(config.environment.rawValue),
            "tier": .string(tier.name), "fileTier": .string(config.tier), "limits": limitsJSON(tier),
            "token": ["audience": .string(config.token.audience), "ttlSeconds": .integer(config.token.ttl.milliseconds / 1000)],
            "routes": .array(config.routes.map { ["prefix": .string($0.prefix), "auth": .string($0.auth.rawValue)] }),
        ]
        if let override = context.services.tiers.tenantTierOverride(appID: config.appID) {
            json["tierOverride"] = .string(override)
        }
        if let upstream = config.upstream { json["upstream"] = .string(upstream.description) }
        return json
    }

    /// `GET /admin/v1/tenants`
    static func listTenants(_ context: RequestContext) {
        let tenants = context.snapshot.tenants.values.sorted { $0.appID < $1.appID }.map { JSONValue.object(tenantJSON(context, $0)) }
        context.respond(status: 200, body: JSONValue.object(["tenants": .array(tenants)]).serialized(), contentType: "application/json")
    }

    /// `GET /admin/v1/tenants/{appId}`: configuration plus this month's usage.
    static func showTenant(_ context: RequestContext, _ tenant: Tenant) {
        context.services.deviceAdmin.usage(tenant: tenant) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(let usage):
                var json = tenantJSON(context, tenant)
                json["usage"] = ["month": .string(usage.shownMonth), "activeDevices": .integer(Int64(usage.activeDevices))]
                context.respond(status: 200, body: JSONValue.object(json).serialized(), contentType: "application/json")
            }
        }
    }

    /// `PUT /admin/v1/tenants/{appId}/tier` `{"tier": "pro"}`
    static func setTenantTier(_ context: RequestContext, _ tenant: Tenant) {
        context.collectAdminBody { body in
            // Exactly the one member: a misspelt extra one is refused, as by `PUT …/tiers/{name}`.
            guard case .object(let members)? = try? JSONValue(parsing: body),
                  members.count == 1, let name = members["tier"]?.stringValue else {
                context.fail(.badRequest("body must be {\"tier\": \"<name>\"} and nothing else"))
                return
            }
            context.services.tiers.setTenantTier(appID: tenant.appID, tier: name, fileTiers: context.snapshot.gateway.tiers) { result in
                switch result {
                case .success:
                    context.services.logger.info("tenant tier changed", [("tenant", .string(tenant.appID)), ("tier", .string(name))])
                    context.respond(status: 200, body: JSONValue.object(tenantJSON(context, tenant)).serialized(), contentType: "application/json")
                case .failure(let error):
                    fail(context, error)
                }
            }
        }
    }

    /// `DELETE /admin/v1/tenants/{appId}/tier`: back to the file's tier.
    static func clearTenantTier(_ context: RequestContext, _ tenant: Tenant) {
        context.services.tiers.clearTenantTier(appID: tenant.appID) { result in
            switch result {
            case .success:
                context.services.logger.info("tenant tier override removed", [("tenant", .string(tenant.appID))])
                context.respond(status: 200, body: JSONValue.object(tenantJSON(context, tenant)).serialized(), contentType: "application/json")
            case .failure(let error):
                fail(context, error)
            }
        }
    }

    /// `GET /admin/v1/tiers`
    static func listTiers(_ context: RequestContext) {
        let tiers = context.services.tiers.effectiveTiers(fileTiers: context.snapshot.gateway.tiers)
        var members: [String: JSONValue] = [:]
        for (name, tier) in tiers {
            var entry = limitsJSON(tier)
            // Which of the numbers are runtime ones (`PUT`), so that `DELETE` can be judged.
            if let runtime = context.services.tiers.runtimeNumbers(tier: name), case .object(var fields) = entry {
                fields["runtime"] = runtime.jsonValue
                entry = .object(fields)
            }
            members[name] = entry
        }
        var answer: [String: JSONValue] = ["tiers": .object(members)]
        let orphaned = context.services.tiers.runtimeNumbersWithoutTier(fileTiers: context.snapshot.gateway.tiers)
        if !orphaned.isEmpty { answer["runtimeWithoutTier"] = .object(orphaned.mapValues { $0.jsonValue }) }
        context.respond(status: 200, body: JSONValue.object(answer).serialized(), contentType: "application/json")
    }

    /// `PUT /admin/v1/tiers/{name}` `{"attest", "challenge", "api", "mad_limit"}` (a file tier
    /// may get a subset; a new tier needs all four).
    static func setTier(_ context: RequestContext, name: String) {
        context.collectAdminBody { body in
            let numbers: TierNumbers
            do throws(TierChangeError) {
                numbers = try TierNumbers(json: body)
            } catch {
                fail(context, error)
                return
            }
            context.services.tiers.setTier(name: name, numbers: numbers, fileTiers: context.snapshot.gateway.tiers) { result in
                switch result {
                case .success(let tier):
                    context.services.logger.info("tier changed", [("tier", .string(name))])
                    context.respond(status: 200, body: JSONValue.object(["name": .string(name), "limits": limitsJSON(tier)]).serialized(),
                                    contentType: "application/json")
                case .failure(let error):
                    fail(context, error)
                }
            }
        }
    }

    /// `DELETE /admin/v1/tiers/{name}`: the tier's runtime numbers removed; answers whether
    /// there were any and the tier now in force (null when only the runtime defined it).
    static func clearTier(_ context: RequestContext, name: String) {
        context.services.tiers.clearTier(name: name) { result in
            switch result {
            case .success(let removed):
                if removed { context.services.logger.info("tier runtime numbers removed", [("tier", .string(name))]) }
                let limits = context.services.tiers.effectiveTiers(fileTiers: context.snapshot.gateway.tiers)[name]
                context.respond(status: 200, body: JSONValue.object([
                    "name": .string(name), "removed": .bool(removed), "limits": limits.map(limitsJSON) ?? .null,
                ]).serialized(), contentType: "application/json")
            case .failure(let error):
                fail(context, error)
            }
        }
    }

    private static func fail(_ context: RequestContext, _ error: TierChangeError) {
        switch error {
        case .invalidTierName, .invalidNumbers:
            context.fail(.badRequest(error.description))
        case .unknownTier:
            context.fail(GatewayError(status: 404, code: "not_found", message: error.description))
        case .store(let redisError):
            context.storeFailed(redisError)
        }
    }
}
