import AGConfig
import AGFormats
import AGPolicy

/// The token answer both attestation routes end with: `{"token", "expiresAt"}` (validate adds
/// `"isValid": true`).
enum TokenResponse {
    /// Ends an attestation route once its commit step answered: the token, or the refusal.
    /// `committed` runs before the token is issued (a log line, say).
    static func afterCommit(_ context: RequestContext, _ result: Result<CommitOutcome, StoreFailure>, tenant: Tenant,
                            tier: RateTier, keyID: String, isValid: Bool? = nil, committed: () -> Void = {}) {
        switch result {
        case .failure(let error):
            context.storeFailed(error)
        case .success(.refused(let refusal)):
            context.refuse(refusal, tenant: tenant)
        case .success(.committed(let subjectID, let subscription, let newlyCounted, let monthlyCount)):
            if newlyCounted { QuotaWarnings.check(context, tenant: tenant, tier: tier, count: monthlyCount) }
            committed()
            send(context, tenant: tenant, keyID: keyID, subjectID: subjectID, subscription: subscription, isValid: isValid)
        }
    }

    static func send(_ context: RequestContext, tenant: Tenant, keyID: String, subjectID: String?, subscription: String?,
                     isValid: Bool? = nil) {
        let subscriptionValue = subscription.flatMap { try? JSONValue(parsing: Array($0.utf8)) }
        do {
            let issued = try context.snapshot.tokenIssuer.issue(tenant: tenant, keyID: keyID, subjectID: subjectID,
                                                                subscription: subscriptionValue,
                                                                nowSeconds: context.services.time.nowMilliseconds / 1000,
                                                                random: context.services.random)
            context.services.metrics.increment(tenant.series.tokensIssued)
            // The token and `{"isValid":true,"token":"","expiresAt":"2026-12-03T04:30:00Z"}`.
            var json = JSONObjectWriter(capacity: issued.token.utf8.count + 96)
            if let isValid { json.add("isValid", isValid) }
            json.add("token", issued.token)
            json.add("expiresAt", UTCDateTime(unixSeconds: issued.expiresAt), fractional: false)
            context.respond(status: 200, json: json)
        } catch {
            context.services.logger.logRepeated(.error, "token signing failed", key: "token signing failed",
                                                [("error", .string(String(describing: error)))])
            context.fail(.internalError)
        }
    }
}

/// Logs the monthly-active-device milestones once each: at the warning ratio and at the limit.
enum QuotaWarnings {
    static func check(_ context: RequestContext, tenant: Tenant, tier: RateTier, count: Int) {
        guard case .limited(let limit) = tier.madLimit else { return }
        let warnAt = Int((Double(limit) * context.snapshot.gateway.quotas.warnRatio).rounded(.up))
        let fields: [(String, LogValue)] = [("tenant", .string(tenant.appID)), ("activeDevices", .int(count)), ("limit", .int(limit))]
        // Both lines when the warning threshold is the limit itself (a small limit, or
        // `warn_ratio: 1`).
        if count == warnAt {
            context.services.logger.warn("monthly active devices reached the warning ratio", fields)
        }
        if count == limit {
            context.services.logger.warn("monthly active device limit reached; the grace period starts with the next new device", fields)
        }
    }
}
