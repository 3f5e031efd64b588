import AGFormats
import AGPolicy

/// `GET /api/v1/attestation/challenge`: a single-use challenge, valid for `challenge.ttl`.
/// The store takes the route's buckets (tenant `challenge`, client IP `challenge`) in the
/// same step as it issues (`ChallengeIssuer`): two Redis round trips, sent together.
enum ChallengeHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        let gateway = context.snapshot.gateway
        let ttl = gateway.challenge.ttl
        let buckets = RateLimitedRoute.challenge.checks(tenant: tenant.bucketKeys, clientIP: { context.clientIP },
                                                        tier: context.effectiveTier(tenant), ipLimits: gateway.ipLimits)
        context.services.challenges.issue(tenant: tenant, ttl: ttl, buckets: buckets) { result in
            switch result {
            case .success((let rateLimit, let issued)):
                guard context.admit(rateLimit, tenant: tenant) else { return }
                guard let issued else { return context.storeFailed(StoreFailure(description: "challenge not issued")) }
                var json = JSONObjectWriter()
                json.add("challenge", issued.challenge)
                json.add("expiresAt", UTCDateTime(unixMilliseconds: issued.issuedAtMilliseconds + ttl.milliseconds), fractional: false)
                json.add("ttl", Int(ttl.milliseconds / 1000))
                context.respond(status: 200, json: json)
            case .failure(let error):
                context.storeFailed(error)
            }
        }
    }
}
