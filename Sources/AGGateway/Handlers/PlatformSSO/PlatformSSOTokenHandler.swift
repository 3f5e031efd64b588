import AGConfig
import AGCrypto
import AGHTTP
import AGPlatformSSO
import AGPolicy

/// `POST {prefix}/token` and `POST {prefix}/refresh`: a Mac's refresh request for a new
/// id_token and refresh token, answered with a compact JWE to its encryption key.
///
/// 1. The form and the JWS structure, without state (400 / `unsupported_grant_type` by `typ`);
///    nothing is spent, not even a rate-limit token.
/// 2. Round trip 1 (`prepareRefresh`): the tenant `attest` bucket and the device record
///    (401 unknown or disabled).
/// 3. The signature (401) and every claim (400), with the device's keys.
/// 4. Round trip 2 (`commitRefresh`): the server nonce is spent, then the refresh token rotates
///    (or the family is refused, expired, revoked, or revoked now for reuse: 401).
/// 5. The id_token is signed and the response encrypted (500 `server_error` if that fails;
///    the Mac retries within `reuse_grace` with the same token).
enum PlatformSSOTokenHandler {
    static func handle(_ context: RequestContext, service: PlatformSSOService) {
        context.collectForm(refuse: { refuse(context, service, $0, $0.statelessOutcome) }) { body in
            let unverified: UnverifiedRefreshRequest
            do throws(OAuthError) {
                unverified = try service.verifier.parse(PlatformSSOTokenForm(body: body).jws)
            } catch {
                return refuse(context, service, error, error.statelessOutcome)
            }
            prepare(context, service: service, request: unverified)
        }
    }

    private static func prepare(_ context: RequestContext, service: PlatformSSOService, request: UnverifiedRefreshRequest) {
        let tenant = service.tenant
        let preparation = PlatformSSOPreparation(tenant: tenant, keyID: request.keyID,
                                                 bucket: tenant.bucket(.attest, tier: context.effectiveTier(tenant)))
        context.services.platformSSO.prepareRefresh(preparation) { result in
            switch result {
            case .failure(let failure):
                refuse(context, service, context.oauthStoreFailed(failure), .unavailable)
            case .success((let rateLimit, let prepared)):
                // A refused bucket answers 429 here, whatever the script did not look at.
                if let refusal = context.oauthRefusal(for: rateLimit, tenant: tenant) {
                    return refuse(context, service, refusal, refusal.status == 429 ? .rateLimited : .unavailable)
                }
                switch prepared {
                case .refused(let refusal):
                    refuse(context, service, refusal.answer.error, refusal.answer.outcome)
                case .ready(let keys, let user):
                    verify(context, service: service, request: request, keys: keys, user: user)
                }
            }
        }
    }

    private static func verify(_ context: RequestContext, service: PlatformSSOService, request: UnverifiedRefreshRequest,
                               keys: PlatformSSODeviceKeys, user: PlatformSSOUser) {
        let verified: VerifiedRefreshRequest
        do throws(OAuthError) {
            verified = try service.verifier.verify(request, device: keys, now: context.services.time.nowMicroseconds / 1_000_000)
        } catch {
            return refuse(context, service, error, error.statelessOutcome)
        }
        let presented = PlatformSSORefreshToken(presented: verified.refreshToken)
        let config = service.config
        let random = context.services.random
        let commit = PlatformSSOCommit(
            tenant: service.tenant, keyID: verified.keyID, serverNonce: verified.serverNonce, nonceTTL: config.nonceTTL,
            presented: presented, successor: presented?.successor(using: random) ?? .newFamily(using: random),
            familyTTL: config.refreshTokenTTL, idle: config.refreshTokenIdle, reuseGrace: config.reuseGrace)
        context.services.platformSSO.commitRefresh(commit) { result in
            switch result {
            case .failure(let failure):
                refuse(context, service, context.oauthStoreFailed(failure), .unavailable)
            case .success(.refused(let refusal)):
                if refusal == .refreshTokenReused {
                    context.services.logger.warn("refresh token reused: its family is revoked", [
                        ("tenant", .string(service.tenant.appID)), ("kid", .string(verified.keyID.urlSafe)),
                        ("family", .string(presented?.familyID ?? "")),
                    ])
                }
                refuse(context, service, refusal.answer.error, refusal.answer.outcome)
            case .success(.rotated(let expiresIn)):
                respond(context, service: service, request: verified, keys: keys, user: user,
                        refreshToken: commit.successor, expiresIn: expiresIn)
            }
        }
    }

    private static func respond(_ context: RequestContext, service: PlatformSSOService, request: VerifiedRefreshRequest,
                                keys: PlatformSSODeviceKeys, user: PlatformSSOUser, refreshToken: PlatformSSORefreshToken,
                                expiresIn: Int64) {
        let type = LoginResponseType(accept: context.request.headers["Accept"])
        let body: String
        do throws(OAuthError) {
            body = try service.builder.response(for: request, device: keys, user: user, refreshToken: refreshToken.text,
                                                refreshTokenExpiresIn: expiresIn,
                                                now: context.services.time.nowMicroseconds / 1_000_000, type: type,
                                                iv: context.services.random.bytes(count: AES256GCM.ivByteCount))
        } catch {
            context.services.logger.error("Platform SSO response failed", [
                ("tenant", .string(service.tenant.appID)), ("reason", .string(error.reason)),
            ])
            return refuse(context, service, error, .serverError)
        }
        context.services.metrics.increment(service.series(.ok))
        context.respond(status: 200, body: Array(body.utf8), contentType: LoginResponseType.contentType)
    }

    /// Counts the outcome and answers the OAuth error.
    private static func refuse(_ context: RequestContext, _ service: PlatformSSOService, _ error: OAuthError,
                               _ outcome: PlatformSSOOutcome) {
        context.services.metrics.increment(service.series(outcome))
        context.services.logger.debug("Platform SSO refresh refused", [
            ("tenant", .string(service.tenant.appID)), ("outcome", .string(outcome.rawValue)),
            ("status", .int(error.status)),
        ])
        context.fail(error)
    }
}
