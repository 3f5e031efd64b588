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
        let preparation = AttestationPreparation(tenant: tenant, keyID: request.keyID, challenge: request.challenge,
                                                 challengeTTL: gateway.challenge.ttl, madLimit: tier.madLimit,
                                                 grace: gateway.quotas.grace)
        context.services.devices.prepareAttestation(preparation) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(.refused(let refusal)):
                context.refuse(refusal, tenant: tenant)
            case .success(.ready(let knownSubjectID)):
                verify(context, tenant: tenant, request: request, knownSubjectID: knownSubjectID, tier: tier)
            }
        }
    }

    private static func verify(_ context: RequestContext, tenant: Tenant, request: ValidateRequest,
                               knownSubjectID: String?, tier: RateTier) {
        let services = context.services
        let time = services.time
        let verifier = AttestationVerifier(trustedRoots: context.snapshot.appAttestRoots.trusted) {
            Date(timeIntervalSince1970: time.nowSeconds)
        }
        let attested: AttestedKey
        do {
            attested = try verifier.verify(attestationObject: request.attestationObject, clientDataHash: request.clientDataHash,
                                           keyID: request.keyIDBytes, appID: tenant.appID, environment: tenant.config.environment)
        } catch {
            // Anyone with a challenge can send a junk attestation: one line per tenant and interval.
            services.logger.logRepeated(.info, "attestation rejected", key: "attestation rejected/" + tenant.appID, [
                ("tenant", .string(tenant.appID)), ("reason", .string(String(describing: error))),
            ])
            context.fail(ValidateError.appleValidationFailed)
            return
        }
        let commit = AttestationCommit(tenant: tenant, keyID: request.keyID, publicKey: attested.publicKey.x963Representation,
                                       environment: attested.environment.rawValue, receipt: attested.receipt,
                                       subjectID: request.subjectID, knownSubjectID: knownSubjectID)
        services.devices.commitAttestation(commit) { result in
            // A refusal here means the key was revoked between prepare and commit.
            TokenResponse.afterCommit(context, result, tenant: tenant, tier: tier, keyID: request.keyID, isValid: true) {
                services.logger.info("device attested", [
                    ("tenant", .string(tenant.appID)), ("environment", .string(attested.environment.rawValue)),
                ])
            }
        }
    }
}
