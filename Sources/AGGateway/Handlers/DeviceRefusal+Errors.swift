import AGPolicy

extension DeviceRefusal {
    /// The contract error for a refusal of the attestation routes' scripts (DESIGN section 3).
    var error: GatewayError {
        switch self {
        case .rateLimited:
            // The bucket outcome carries the 429 itself; this is never answered on its own.
            GatewayError(status: 429, code: "rate_limited", message: "rate limit exceeded for the attest bucket")
        case .notFound:
            GatewayError(status: 404, code: "not_found", message: "no attestation found for this key id; attest first")
        case .forbidden:
            GatewayError(status: 403, code: "forbidden", message: "the attestation for this key has been revoked")
        case .challengeInvalid:
            GatewayError(status: 400, code: "challenge_invalid", message: "unknown challenge")
        case .challengeAlreadyUsed:
            GatewayError(status: 400, code: "challenge_already_used", message: "challenge already used")
        case .challengeExpired:
            GatewayError(status: 400, code: "challenge_expired", message: "challenge expired")
        case .quotaExceeded(let limit, let current):
            .quotaExceeded(limit: limit, current: current)
        case .counterConflict:
            // Another refresh of this device won the compare-and-set: this one is a replay.
            GatewayError(status: 409, code: "reattest_required", message: "the assertion counter was already used")
        }
    }
}

extension RequestContext {
    /// Answers an attestation route's refusal; a quota refusal is counted for the tenant too
    /// (`attestgate_quota_refused_total`).
    func refuse(_ refusal: DeviceRefusal, tenant: Tenant) {
        if case .quotaExceeded = refusal { services.metrics.increment(tenant.series.quotaRefused) }
        fail(refusal.error)
    }
}

extension GatewayError {
    static func quotaExceeded(limit: Int, current: Int) -> GatewayError {
        var error = GatewayError(status: 402, code: "quota_exceeded",
                                 message: "monthly active device limit reached and the grace period is over")
        error.extra = [("limit", limit), ("current", current)]
        return error
    }

    /// The stored key signed an assertion that failed a later check: the stored attestation is
    /// invalidated (409).
    static let reattestRequired = GatewayError(
        status: 409, code: "reattest_required",
        message: "assertion verification failed; the stored attestation is invalidated",
        hint: "drop the local key and attest again")

    /// No attestation for this key here, and its assertion was made for another App ID: the key
    /// belongs to a different Bundle/Team ID (409, the seed's code for that case).
    static let keyOfAnotherApp = GatewayError(
        status: 409, code: "reattest_required",
        message: "this key is not registered here: its assertion was made for another Bundle/Team ID",
        hint: "drop the local key and attest again")

    /// The assertion does not verify with the stored key (409, the seed's code): it proves
    /// nothing about the device, so its record is kept.
    static let assertionUnverified = GatewayError(
        status: 409, code: "reattest_required",
        message: "assertion verification failed",
        hint: "a device that keeps getting this should drop its local key and attest again")
}
