import AGConfig
import AGPolicy
import AGAppAttest
import AGCrypto
import AGFormats
import AGHTTP
import Foundation

/// `POST /api/v1/attestation/refresh`: a signed device assertion for a fresh JWT
/// (`seeds/app-attest-refresh-endpoint.md`). Two Redis round trips: `prepare` before the
/// signature check (the tenant `attest` bucket, device, quota, challenge), `commit` after it
/// (counter compare-and-set). A malformed request is refused before either, without a token.
enum RefreshHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        context.collectAttestationRequest(RefreshRequest.init(body:)) { request in
            process(context, tenant: tenant, request: request)
        }
    }

    private static func process(_ context: RequestContext, tenant: Tenant, request: RefreshRequest) {
        let worker = context.worker
        let gateway = context.snapshot.gateway
        let tier = context.effectiveTier(tenant)
        let month = DeviceStore.month()
        let bucket = RateLimitedRoute.refresh.checks(appID: tenant.appID, clientIP: context.clientIP, tier: tier,
                                                     ipLimits: gateway.ipLimits)[0]
        worker.devices.prepare(tenant: tenant, keyID: request.keyID,
                               challengeKey: ChallengeStore.key(tenant: tenant, challenge: request.challenge),
                               month: month, challengeTTL: gateway.challenge.ttl, madLimit: tier.madLimit,
                               grace: gateway.quotas.grace, bucket: bucket) { result in
            guard case .success(let (rateLimit, outcome)) = result else {
                if case .failure(let error) = result { context.storeFailed(error) }
                return
            }
            guard context.admit(rateLimit, tenant: tenant) else { return }
            switch outcome {
            case .rateLimited:
                break
            case .refused(let error):
                context.fail(error)
            case .ready(let publicKey, let counter, let knownSubjectID):
                verify(context, tenant: tenant, request: request, month: month, publicKey: publicKey,
                       counter: counter, knownSubjectID: knownSubjectID, tier: tier)
            }
        }
    }

    private static func verify(_ context: RequestContext, tenant: Tenant, request: RefreshRequest, month: String,
                               publicKey: String, counter: UInt32, knownSubjectID: String?, tier: RateTier) {
        let worker = context.worker
        let newCounter: UInt32
        do {
            guard let keyBytes = Base64.decode(publicKey) else { throw AppAttestError.invalidSignature }
            let key = try P256.PublicKey(x963Representation: keyBytes)
            newCounter = try AssertionVerifier.verify(assertion: request.assertion, clientDataHash: request.clientDataHash,
                                                      publicKey: key, appID: tenant.appID, previousCounter: counter)
        } catch {
            worker.shared.logger.info("assertion rejected, attestation invalidated", [
                ("tenant", .string(tenant.appID)), ("reason", .string(String(describing: error))),
            ])
            worker.devices.invalidate(tenant: tenant, keyID: request.keyID) { result in
                if case .failure(let error) = result {
                    context.storeFailed(error)
                } else {
                    context.fail(RefreshError.reattestRequired)
                }
            }
            return
        }
        worker.devices.commit(tenant: tenant, keyID: request.keyID, month: month, expectedCounter: counter,
                              newCounter: newCounter, subjectID: request.subjectID, knownSubjectID: knownSubjectID) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(.refused("counter_conflict")):
                // Another refresh of this device won the compare-and-set: this one is a replay.
                context.fail(GatewayError(status: 409, code: "reattest_required",
                                          message: "the assertion counter was already used"))
            case .success(.refused(let status)):
                context.fail(RefreshError.error(for: status))
            case .success(.committed(let subjectID, let subscription, let newlyCounted, let monthlyCount)):
                if newlyCounted { QuotaWarnings.check(context, tenant: tenant, tier: tier, count: monthlyCount) }
                respond(context, tenant: tenant, keyID: request.keyID, subjectID: subjectID, subscription: subscription)
            }
        }
    }

    /// Issues the token and answers `{"token", "expiresAt"}` (validate adds `"isValid": true`).
    static func respond(_ context: RequestContext, tenant: Tenant, keyID: String, subjectID: String?, subscription: String?,
                        isValid: Bool? = nil) {
        let subscriptionValue = subscription.flatMap { try? JSONValue(parsing: Array($0.utf8)) }
        do {
            let issued = try context.snapshot.tokenIssuer.issue(tenant: tenant, keyID: keyID, subjectID: subjectID,
                                                                subscription: subscriptionValue)
            context.worker.metrics.increment("attestgate_tokens_issued_total{tenant=\"\(tenant.appID)\"}")
            var json = JSONObjectWriter()
            if let isValid { json.add("isValid", isValid) }
            json.add("token", issued.token)
            json.add("expiresAt", ISO8601.string(issued.expiresAt))
            context.respond(status: 200, json: json.finished())
        } catch {
            context.worker.shared.logger.error("token signing failed", [("error", .string(String(describing: error)))])
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
        if count == warnAt {
            context.worker.shared.logger.warn("monthly active devices reached the warning ratio", fields)
        } else if count == limit {
            context.worker.shared.logger.warn("monthly active device limit reached; the grace period starts with the next new device", fields)
        }
    }
}

extension RequestContext {
    /// Answers 503 `store_unavailable` for a Redis failure, and logs it.
    func storeFailed(_ error: Error) {
        worker.metrics.increment("attestgate_redis_errors_total")
        worker.shared.logger.warn("state store failed", [("route", .string(route)), ("error", .string(String(describing: error)))])
        fail(.storeUnavailable)
    }
}
