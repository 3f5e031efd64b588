import AGConfig
import AGPolicy
import Foundation

/// `GET /api/v1/attestation/challenge`: a single-use challenge, valid for `challenge.ttl`.
enum ChallengeHandler {
    static func handle(_ context: RequestContext, tenant: Tenant) {
        let ttl = context.snapshot.gateway.challenge.ttl
        context.worker.challenges.issue(tenant: tenant, ttl: ttl) { result in
            switch result {
            case .success(let issued):
                let expiresAt = Date(timeIntervalSince1970: Double(issued.issuedAtMs + ttl.milliseconds) / 1000)
                var json = JSONObjectWriter()
                json.add("challenge", issued.challenge)
                json.add("expiresAt", ISO8601.string(expiresAt))
                json.add("ttl", Int(ttl.milliseconds / 1000))
                context.respond(status: 200, json: json.finished())
            case .failure(let error):
                context.storeFailed(error)
            }
        }
    }
}
