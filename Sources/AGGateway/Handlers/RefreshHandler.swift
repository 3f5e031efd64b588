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
                case .refused(.notFound) where keyOfAnotherApp(request, tenant: tenant):
                    context.fail(.keyOfAnotherApp)
                case .refused(let refusal):
                    context.refuse(refusal, tenant: tenant)
                case .ready(let publicKey, let counter, let knownSubjectID):
                    verify(context, tenant: tenant, request: request, publicKey: publicKey, counter: counter,
                           knownSubjectID: knownSubjectID, tier: tier)
                }
            }
        }
    }

    /// A key this tenant does not know, whose assertion names another app's RP ID hash: the
    /// key is registered for (or was made by) a different Bundle/Team ID, which the seed
    /// answers 409 `reattest_required` — the device must drop it and attest a new one, where
    /// a 404 would have it attest this key again. Nothing is verified or changed (no key to
    /// verify with), so a forged one only earns the same answer.
    private static func keyOfAnotherApp(_ request: RefreshRequest, tenant: Tenant) -> Bool {
        guard let named = AssertionVerifier.unverifiedRPIDHash(of: request.assertion) else { return false }
        return named != tenant.rpIDHash
    }

    private static func verify(_ context: RequestContext, tenant: Tenant, request: RefreshRequest, publicKey: [UInt8],
                               counter: UInt32, knownSubjectID: String?, tier: RateTier) {
        let services = context.services
        // A stored key that does not parse is a corrupt record (like one whose base64 is bad),
        // not a verdict on the device. Parsed keys are cached (`DeviceKeyCache`).
        guard let key = try? services.deviceKeys.key(keyID: request.keyID, x963: publicKey) else {
            return context.storeFailed(StoreFailure(description: "corrupt device record"))
        }
        let newCounter: UInt32
        do throws(AssertionError) {
            newCounter = try AssertionVerifier.verify(assertion: request.assertion, clientDataHash: request.clientDataHash,
                                                      publicKey: key, rpIDHash: tenant.rpIDHash, previousCounter: counter)
        } catch {
            refuse(context, tenant: tenant, request: request, publicKey: publicKey, counter: counter, error: error)
            return
        }
        let commit = RefreshCommit(tenant: tenant, keyID: request.keyID, expectedCounter: counter, newCounter: newCounter,
                                   subjectID: request.subjectID, knownSubjectID: knownSubjectID)
        services.devices.commitRefresh(commit) { result in
            TokenResponse.afterCommit(context, result, tenant: tenant, tier: tier, keyID: request.keyID)
        }
    }

    /// A refused assertion costs the device its record only when the stored key signed it (a
    /// wrong RP ID hash, a counter that did not increase): that proves the key misbehaved. Bytes
    /// the key never signed prove nothing about the device, since anyone who knows its keyId
    /// (the token's `sub`) can send them; they are answered with the same 409, and the record
    /// stays.
    private static func refuse(_ context: RequestContext, tenant: Tenant, request: RefreshRequest, publicKey: [UInt8],
                               counter: UInt32, error: AssertionError) {
        let services = context.services
        let kind = error.isSignedByStoredKey ? "signed" : "unsigned"
        services.metrics.increment("attestgate_assertion_refusals_total{kind=\"\(kind)\",reason=\"\(error.reason)\"}")
        guard error.isSignedByStoredKey else {
            // Anyone who knows a keyId can send these: one line per tenant and interval.
            services.logger.logRepeated(.info, "assertion refused, attestation kept", key: "assertion refused/" + tenant.appID, [
                ("tenant", .string(tenant.appID)), ("reason", .string(error.reason)),
            ])
            return context.fail(.assertionUnverified)
        }
        services.devices.invalidate(tenant: tenant, keyID: request.keyID, publicKey: publicKey, counter: counter) { result in
            switch result {
            case .failure(let failure):
                context.storeFailed(failure)
            case .success(let deleted):
                services.logger.info(deleted ? "assertion refused, attestation invalidated"
                                             : "assertion refused, record kept (replaced, imported again, its counter moved, or revoked)", [
                    ("tenant", .string(tenant.appID)), ("reason", .string(error.reason)),
                ])
                context.fail(.reattestRequired)
            }
        }
    }
}
