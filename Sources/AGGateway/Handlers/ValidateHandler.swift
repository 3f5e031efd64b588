import AGConfig
import AGPolicy
import AGAppAttest
import AGCrypto
import AGFormats
import AGHTTP
import Foundation

/// `POST /api/v1/attestation/validate`: device onboarding. Verifies an App Attest attestation
/// (DESIGN section 5), stores the device key and answers a token exactly as refresh does.
///
/// A malformed request is refused before Redis. Then the tenant `attest` and IP `validate`
/// buckets (fail closed), a `prepare` script (revocation, quota, challenge, which it spends),
/// the attestation check, and a `commit` script that stores the key with counter 0.
enum ValidateHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        context.collectAttestationRequest(ValidateRequest.init(body:)) { request in
            context.rateLimit(.validate, tenant: tenant) { prepare(context, tenant: tenant, request: request) }
        }
    }

    private static func prepare(_ context: RequestContext, tenant: Tenant, request: ValidateRequest) {
        let gateway = context.snapshot.gateway
        let tier = context.effectiveTier(tenant)
        let month = DeviceStore.month()
        context.worker.devices.prepareAttestation(
            tenant: tenant, keyID: request.keyID, challengeKey: ChallengeStore.key(tenant: tenant, challenge: request.challenge),
            month: month, challengeTTL: gateway.challenge.ttl, madLimit: tier.madLimit, grace: gateway.quotas.grace
        ) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(.refused(let error)):
                context.fail(error)
            case .success(.ready(let knownSubjectID)):
                verify(context, tenant: tenant, request: request, month: month, knownSubjectID: knownSubjectID, tier: tier)
            }
        }
    }

    private static func verify(_ context: RequestContext, tenant: Tenant, request: ValidateRequest, month: String,
                               knownSubjectID: String?, tier: RateTier) {
        let worker = context.worker
        let verifier = AttestationVerifier(trustedRoots: context.snapshot.appAttestRoots.trusted)
        let attested: AttestedKey
        do {
            attested = try verifier.verify(attestationObject: request.attestationObject, clientDataHash: request.clientDataHash,
                                           keyID: request.keyIDBytes, appID: tenant.appID, environment: tenant.config.environment)
        } catch {
            worker.shared.logger.info("attestation rejected", [
                ("tenant", .string(tenant.appID)), ("reason", .string(String(describing: error))),
            ])
            context.fail(ValidateError.appleValidationFailed)
            return
        }
        worker.devices.commitAttestation(
            tenant: tenant, keyID: request.keyID, month: month, publicKey: Base64.encode(attested.publicKey.x963Representation),
            environment: attested.environment.rawValue, receipt: Base64.encode(attested.receipt),
            subjectID: request.subjectID, knownSubjectID: knownSubjectID
        ) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(.refused(let status)):
                // Revoked between prepare and commit.
                context.fail(RefreshError.error(for: status))
            case .success(.committed(let subjectID, let subscription, let newlyCounted, let monthlyCount)):
                if newlyCounted { QuotaWarnings.check(context, tenant: tenant, tier: tier, count: monthlyCount) }
                worker.shared.logger.info("device attested", [
                    ("tenant", .string(tenant.appID)), ("environment", .string(attested.environment.rawValue)),
                ])
                RefreshHandler.respond(context, tenant: tenant, keyID: request.keyID, subjectID: subjectID,
                                       subscription: subscription, isValid: true)
            }
        }
    }
}
