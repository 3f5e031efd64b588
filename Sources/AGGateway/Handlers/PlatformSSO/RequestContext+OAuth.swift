import AGConfig
import AGHTTP
import AGPlatformSSO
import AGPolicy

extension RequestContext {
    /// Answers an OAuth error (`{"error","error_description","requestId"}`, the Platform SSO
    /// endpoints' format) through the same path as every other answer: `X-Request-ID`,
    /// `Cache-Control: no-store`, the extra headers, metrics and the access-log line. A 401
    /// carries `WWW-Authenticate: PlatformSSO` (RFC 9110 section 15.5.2: a 401 MUST carry a
    /// challenge; a scheme of its own, as App Attest's 401s have theirs, so that no HTTP client
    /// library takes it for one it answers by itself, as Basic or Negotiate would be).
    func fail(_ error: OAuthError, headers extra: HTTPHeaders = HTTPHeaders()) {
        errorCode = error.code
        var headers = extra
        if let retryAfter = error.retryAfter { headers.add("Retry-After", String(retryAfter)) }
        if error.status == 401 { headers.add("WWW-Authenticate", "PlatformSSO") }
        respond(status: error.status, body: error.body(requestID: requestID.description), contentType: "application/json", headers: headers)
    }

    /// Applies a rate-limit outcome the OAuth way: adds the `X-RateLimit-*` headers to whatever
    /// answer follows and returns the refusal to answer (429 `rate_limited` with `Retry-After`,
    /// or 503 `temporarily_unavailable`), nil when the request may go on.
    func oauthRefusal(for outcome: RateLimitOutcome, tenant: Tenant) -> OAuthError? {
        if let decision = outcome.headerDecision { addRateLimitHeaders(decision) }
        switch outcome {
        case .allowed:
            return nil
        case .limited(let bucket):
            services.metrics.increment(tenant.series.rateLimited(bucket.check.name))
            return .rateLimited(retryAfter: bucket.decision.retryAfter)
        case .storeUnavailable:
            return oauthStoreFailed(StoreFailure(description: "rate limit store unavailable"))
        }
    }

    /// Counts and logs a store failure; the answer is 503 `temporarily_unavailable` (fail closed).
    func oauthStoreFailed(_ failure: any Error) -> OAuthError {
        services.metrics.increment(MetricsRegistry.redisErrors)
        // One line per route and interval, as `storeFailed` logs (an outage is not a line per request).
        services.logger.logRepeated(.warn, "state store failed", key: "state store failed/" + route,
                                    [("route", .string(route)), ("error", .string(String(describing: failure)))])
        return .temporarilyUnavailable
    }

    /// Echoes the Mac's `client-request-id` on every answer, when it is a sane id (the Mac sends
    /// a UUID; anything else is not repeated into headers).
    func echoClientRequestID() {
        guard let id = request.headers["client-request-id"], RequestID.isSane(id) else { return }
        extraHeaders.add("client-request-id", id)
    }

    /// Reads a form body (up to `server.max_body_bytes`): a body that is too large or malformed
    /// is 400 `invalid_request`, answered by `refuse`; a vanished client gets no answer (499 logged).
    func collectForm(refuse: @escaping (OAuthError) -> Void, next: @escaping ([UInt8]) -> Void) {
        collectWholeBody(limit: snapshot.gateway.server.maxBodyBytes, refuse: { refuse(.invalidRequest($0)) }, next: next)
    }
}

extension PlatformSSORefusal {
    /// The section 11 error and the metrics outcome of a store refusal.
    var answer: (error: OAuthError, outcome: PlatformSSOOutcome) {
        switch self {
        // The bucket outcome carries the 429 itself; this is never answered on its own.
        case .rateLimited: (.rateLimited(retryAfter: 1), .rateLimited)
        case .deviceUnknown: (.deviceUnknown, .deviceUnknown)
        case .deviceDisabled: (.deviceDisabled, .deviceDisabled)
        case .nonceUnknown: (.nonce(.unknown), .nonceUnknown)
        case .nonceExpired: (.nonce(.expired), .nonceExpired)
        case .nonceUsed: (.nonce(.used), .nonceUsed)
        case .refreshTokenUnknown: (.refreshToken(.unknown), .refreshTokenUnknown)
        case .refreshTokenExpired: (.refreshToken(.expired), .refreshTokenExpired)
        case .refreshTokenRevoked: (.refreshToken(.revoked), .refreshTokenRevoked)
        case .refreshTokenReused: (.refreshToken(.reused), .refreshTokenReused)
        }
    }
}

extension OAuthError {
    /// The metrics outcome of a refusal found without the store (form, JWS, signature, claims).
    var statelessOutcome: PlatformSSOOutcome {
        switch code {
        case "unsupported_grant_type": .unsupportedGrantType
        case "server_error": .serverError
        case "invalid_grant": self == .signatureInvalid ? .signatureInvalid : .deviceUnknown
        default: .invalidRequest
        }
    }
}
