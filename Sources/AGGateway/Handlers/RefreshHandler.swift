import AGAppAttest
import AGConfig
import AGCrypto

/// `POST /api/v1/attestation/refresh`: a signed device assertion for a fresh JWT
/// (`seeds/app-attest-refresh-endpoint.md`). Two store round trips: `prepareRefresh` before
/// the signature check (the tenant `attest` bucket, device, quota, challenge), `commitRefresh`
/// after it (counter compare-and-set). A malformed request is refused before either, without
/// taking a rate-limit token.
enum RefreshHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        context.collectAttestationRequest(RefreshRequest.init(body:)) { request in
            prepare(context, tenant: tenant, request: request)
        }
    }

    private static func prepare(_ context: RequestContext, tenant: Tenant, request: RefreshRequest) {
        let gateway = context.snapshot.gateway
        let tier = context.effectiveTier(tenant)
        let preparation = RefreshPreparation(
            tenant: tenant, keyID: request.keyID, challenge: request.challenge, challengeTTL: gateway.challenge.ttl,
            madLimit: tier.madLimit, grace: gateway.quotas.grace, bucket: tenant.bucket(.attest, tier: tier))
        context.services.devices.prepareRefresh(preparation) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success((let rateLimit, let prepared)):
                // A refused bucket answers 429 here, whatever the script did not look at.
                guard context.admit(rateLimit, tenant: tenant) else { return }
                switch prepared {
                case .refused(let refusal):
                    context.fail(refusal.error)
                case .ready(let publicKey, let counter, let knownSubjectID):
                    verify(context, tenant: tenant, request: request, publicKey: publicKey, counter: counter,
                           knownSubjectID: knownSubjectID, tier: tier)
                }
            }
        }
    }

    private static func verify(_ context: RequestContext, tenant: Tenant, request: RefreshRequest, publicKey: [UInt8],
                               counter: UInt32, knownSubjectID: String?, tier: RateTier) {
        let services = context.services
        let newCounter: UInt32
        do {
            let key = try services.deviceKeys.key(keyID: request.keyID, x963: publicKey)
            newCounter = try AssertionVerifier.verify(assertion: request.assertion, clientDataHash: request.clientDataHash,
                                                      publicKey: key, appID: tenant.appID, previousCounter: counter)
        } catch {
            services.logger.info("assertion rejected, attestation invalidated", [
                ("tenant", .string(tenant.appID)), ("reason", .string(String(describing: error))),
            ])
            services.devices.invalidate(tenant: tenant, keyID: request.keyID) { result in
                if case .failure(let error) = result {
                    context.storeFailed(error)
                } else {
                    context.fail(.reattestRequired)
                }
            }
            return
        }
        let commit = RefreshCommit(tenant: tenant, keyID: request.keyID, expectedCounter: counter, newCounter: newCounter,
                                   subjectID: request.subjectID, knownSubjectID: knownSubjectID)
        services.devices.commitRefresh(commit) { result in
            TokenResponse.afterCommit(context, result, tenant: tenant, tier: tier, keyID: request.keyID)
        }
    }
}
