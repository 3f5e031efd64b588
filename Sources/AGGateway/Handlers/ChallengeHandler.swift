import AGConfig
import AGFormats
import AGPolicy

/// `GET /api/v1/attestation/challenge`: a single-use challenge, valid for `challenge.ttl`.
enum ChallengeHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        let ttl = context.snapshot.gateway.challenge.ttl
        context.services.challenges.issue(tenant: tenant, ttl: ttl) { result in
            switch result {
            case .success(let issued):
                var json = JSONObjectWriter()
                json.add("challenge", issued.challenge)
                json.add("expiresAt", UTCDateTime(unixMilliseconds: issued.issuedAtMilliseconds + ttl.milliseconds).iso8601())
                json.add("ttl", Int(ttl.milliseconds / 1000))
                context.respond(status: 200, json: json.finished())
            case .failure(let error):
                context.storeFailed(error)
            }
        }
    }
}
