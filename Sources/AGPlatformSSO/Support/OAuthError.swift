internal import AGFormats

/// A refused Platform SSO call as OAuth reports it (RFC 6749 §5.2): HTTP status, `error` code
/// and `error_description`, rendered as `{"error","error_description","requestId"}`.
///
/// The status split is what a Mac acts on: 401 means "the user must log in again", anything
/// else "retry later". Every refusal of DESIGN section 11 has a constructor here, so handlers
/// never spell a status or code themselves.
public struct OAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// The OAuth `error` code.
    public let code: String
    /// The OAuth `error_description`: says what was wrong, never echoes a token or key.
    public let reason: String
    /// Seconds for `Retry-After` (rate limiting only).
    public let retryAfter: Int?

    public init(status: Int, code: String, reason: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.reason = reason
        self.retryAfter = retryAfter
    }

    public var description: String { "\(status) \(code): \(reason)" }

    /// The response body.
    public func body(requestID: String) -> [UInt8] {
        JSONValue.object(["error": .string(code), "error_description": .string(reason), "requestId": .string(requestID)])
            .serialized()
    }

    // MARK: Section 11 refusals

    /// 400 `invalid_request`: a malformed form, JWS or JSON, or a missing or wrong claim.
    public static func invalidRequest(_ reason: String) -> OAuthError {
        OAuthError(status: 400, code: "invalid_request", reason: reason)
    }

    /// 401 `invalid_grant`: the credential is not (or no longer) good; the Mac asks the user to log in.
    public static func invalidGrant(_ reason: String) -> OAuthError {
        OAuthError(status: 401, code: "invalid_grant", reason: reason)
    }

    /// 400 `unsupported_grant_type`: a form `grant_type` or JWS `typ` this endpoint does not serve.
    public static func unsupportedGrantType(_ reason: String) -> OAuthError {
        OAuthError(status: 400, code: "unsupported_grant_type", reason: reason)
    }

    /// 429 `rate_limited` with `Retry-After`.
    public static func rateLimited(retryAfter seconds: Int) -> OAuthError {
        OAuthError(status: 429, code: "rate_limited", reason: "too many requests", retryAfter: max(1, seconds))
    }

    /// 503 `temporarily_unavailable`: the state store cannot be reached (fail closed).
    public static let temporarilyUnavailable = OAuthError(
        status: 503, code: "temporarily_unavailable", reason: "the service is temporarily unavailable")

    /// 401: the signature does not verify with the device's registered signing key.
    public static let signatureInvalid = invalidGrant("the request signature does not verify")

    /// 401: no device is registered under the request's `kid`.
    public static let deviceUnknown = invalidGrant("device unknown")

    /// 401: the device is registered but disabled (revoked by the operator).
    public static let deviceDisabled = invalidGrant("device disabled")

    /// What the store found wrong with the server nonce.
    public enum NonceProblem: String, Sendable, CaseIterable {
        case unknown, expired, used
    }

    /// 400 `invalid_grant`, description "nonce …": the server nonce is unknown, expired or used.
    /// A 400, not a 401, because a fresh nonce fixes it without the user logging in.
    public static func nonce(_ problem: NonceProblem) -> OAuthError {
        let reason = switch problem {
        case .unknown: "nonce unknown"
        case .expired: "nonce expired"
        case .used: "nonce already used"
        }
        return OAuthError(status: 400, code: "invalid_grant", reason: reason)
    }

    /// What the store found wrong with the refresh token.
    public enum RefreshTokenProblem: String, Sendable, CaseIterable {
        /// No such token, or one bound to another tenant, device or user.
        case unknown
        /// Its family passed `refresh_token_ttl` or `refresh_token_idle`.
        case expired
        /// Its family was revoked (by the operator, or after a reuse).
        case revoked
        /// It was used before and the grace window does not apply: the family is now revoked.
        case reused
    }

    /// 401 `invalid_grant`: the refresh token cannot be used.
    public static func refreshToken(_ problem: RefreshTokenProblem) -> OAuthError {
        let reason = switch problem {
        case .unknown: "refresh token unknown"
        case .expired: "refresh token expired"
        case .revoked: "refresh token revoked"
        case .reused: "refresh token reused; every token of its family is revoked"
        }
        return invalidGrant(reason)
    }
}

extension OAuthError {
    /// 500 `server_error`: the gateway itself failed (signing or encryption); the Mac retries later.
    public static func serverError(_ reason: String) -> OAuthError {
        OAuthError(status: 500, code: "server_error", reason: reason)
    }
}
