import AGConfig
import AGPolicy
import AGHTTP

extension RequestContext {
    /// The tenant's tier now: its file tier, or the runtime override, with runtime numbers.
    func effectiveTier(_ tenant: Tenant) -> RateTier {
        services.tiers.effectiveTier(for: tenant, in: snapshot)
    }

    /// The client's address: the socket peer, or the nearest untrusted address of
    /// `X-Forwarded-For` when the peer itself is a trusted proxy (`ServerConfig.clientAddress`).
    var clientIP: IPAddress {
        let peer = IPAddress(request.remoteAddress) ?? .v4(0)
        let server = snapshot.gateway.server
        guard server.trusts(peer) else { return peer }
        return server.clientAddress(peer: peer, forwardedFor: request.headers.values("X-Forwarded-For"))
    }

    /// Takes a token from every bucket of `route`; answers 429 `rate_limited` or 503 itself,
    /// otherwise calls `next`. The `X-RateLimit-*` headers go on whatever answer follows.
    func rateLimit(_ route: RateLimitedRoute, tenant: Tenant, next: @escaping () -> Void) {
        let checks = route.checks(tenant: tenant.bucketKeys, clientIP: { clientIP }, tier: effectiveTier(tenant),
                                  ipLimits: snapshot.gateway.ipLimits)
        let fallback = route.fallback(snapshot.gateway.rateLimits)
        let decided: (RateLimitOutcome) -> Void = { [self] outcome in
            if admit(outcome, tenant: tenant) { next() }
        }
        // Proxied requests spend leased tokens: no store round trip per request.
        if route == .api, checks.count == 1 {
            services.limiter.lease(checks[0], epochKey: tenant.deviceEpochKey, fallback: fallback, completion: decided)
        } else {
            services.limiter.check(checks, fallback: fallback, completion: decided)
        }
    }

    /// The proxied `api` bucket for a request with `token` of the device `keyID`: the device
    /// record must exist and not be revoked (checked again whenever the tenant's device epoch
    /// moved since this worker last found it in good standing, see `RateLimiter+Devices`). A
    /// revoked or missing record is refused like a revocation; when Redis cannot answer,
    /// `proxy.unverified_token_policy` decides (`deny`: 503).
    func rateLimitAPI(tenant: Tenant, token: VerifiedToken, keyID: String, next: @escaping () -> Void) {
        let (check, device) = apiCheck(tenant: tenant, token: token, keyID: keyID)
        services.limiter.admit(check, device: device, fallback: RateLimitedRoute.api.fallback(snapshot.gateway.rateLimits)) { [self] admission in
            if settleAPI(admission, tenant: tenant, token: token) { next() }
        }
    }

    /// `rateLimitAPI` when the limiter can answer at once (`Limiter.admitNow`: the lease holds a
    /// token and the device epoch is current): whether the request may go on, having answered
    /// it otherwise; nil when `rateLimitAPI` must ask Redis. No closure is made on this path.
    func rateLimitAPINow(tenant: Tenant, token: VerifiedToken, keyID: String) -> Bool? {
        let (check, device) = apiCheck(tenant: tenant, token: token, keyID: keyID)
        guard let admission = services.limiter.admitNow(check, device: device) else { return nil }
        return settleAPI(admission, tenant: tenant, token: token)
    }

    private func apiCheck(tenant: Tenant, token: VerifiedToken, keyID: String) -> (BucketCheck, DeviceCheck) {
        let check = RateLimitedRoute.apiCheck(tenant: tenant.bucketKeys, tier: effectiveTier(tenant))
        let deviceKey = token.deviceKey ?? RedisDeviceStore.deviceKey(tenant, keyID)
        token.deviceKey = deviceKey
        return (check, DeviceCheck(deviceKey: deviceKey, epochKey: tenant.deviceEpochKey, checkedAt: token.checkedEpoch))
    }

    /// Applies the device admission of a proxied request: whether it may go on, having
    /// answered it otherwise.
    private func settleAPI(_ admission: DeviceAdmission, tenant: Tenant, token: VerifiedToken) -> Bool {
        switch admission {
        case .refused(let standing):
            token.checkedEpoch = nil
            services.metrics.increment(standing == .revoked ? RefusedDeviceSeries.revoked : RefusedDeviceSeries.unknown)
            fail(.deviceRevoked)
            return false
        case .checked(let outcome, let epoch):
            if let epoch { token.checkedEpoch = epoch }
            return admit(outcome, tenant: tenant)
        case .unverified(let outcome):
            switch snapshot.gateway.proxy.unverifiedTokenPolicy {
            case .deny:
                services.metrics.increment("attestgate_unverified_tokens_total{policy=\"deny\"}")
                storeFailed(StoreFailure(description: "device record unreadable"))
                return false
            case .allow:
                services.metrics.increment("attestgate_unverified_tokens_total{policy=\"allow\"}")
                return admit(outcome, tenant: tenant)
            }
        }
    }

    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` for `decision` go on whatever answer
    /// follows (as `RateLimitOutcome.headers` spells them): kept as the decision and written as
    /// digits into the answer's head, not as three strings per request.
    func addRateLimitHeaders(_ decision: TokenBucket.Decision) {
        rateLimitDecision = decision
    }

    /// Applies a rate-limit outcome: adds its headers, answers 429 or 503 itself when the
    /// request may not go on, and says whether it may.
    func admit(_ outcome: RateLimitOutcome, tenant: Tenant) -> Bool {
        if let decision = outcome.headerDecision { addRateLimitHeaders(decision) }
        switch outcome {
        case .allowed:
            return true
        case .limited(let bucket):
            services.metrics.increment(tenant.series.rateLimited(bucket.check.name))
            var error = GatewayError(status: 429, code: "rate_limited",
                                     message: "rate limit exceeded for the \(bucket.check.name) bucket")
            error.headers = [("Retry-After", String(bucket.decision.retryAfter))]
            error.extra = [("limit", bucket.decision.limit), ("retryAfter", bucket.decision.retryAfter)]
            fail(error)
        case .storeUnavailable:
            storeFailed(StoreFailure(description: "rate limit store unavailable"))
        }
        return false
    }
}

/// `attestgate_proxy_refused_devices_total`: proxied requests refused for their device, by the
/// record read in Redis or by a revocation this worker heard on the events stream.
enum RefusedDeviceSeries {
    static let revoked = "attestgate_proxy_refused_devices_total{reason=\"revoked\"}"
    static let unknown = "attestgate_proxy_refused_devices_total{reason=\"unknown\"}"
}
