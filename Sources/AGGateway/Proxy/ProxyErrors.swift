import AGConfig
import AGPolicy

/// The proxy's contract errors (DESIGN section 6).
extension GatewayError {
    static let tokenMissing: GatewayError = {
        var error = GatewayError(status: 401, code: "token_missing", message: "this route needs a bearer token")
        error.headers = [("WWW-Authenticate", "Bearer")]
        return error
    }()

    static func tokenInvalid(_ message: String) -> GatewayError {
        var error = GatewayError(status: 401, code: "token_invalid", message: message)
        error.headers = [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]
        return error
    }

    static let tokenExpired: GatewayError = {
        var error = GatewayError(status: 401, code: "token_expired", message: "the token has expired",
                                 hint: "refresh the token and retry")
        error.headers = [("WWW-Authenticate", "Bearer error=\"invalid_token\"")]
        return error
    }()

    static let tokenTenantMismatch = GatewayError(
        status: 403, code: "token_tenant_mismatch", message: "the token was issued for another app")

    static let deviceRevoked = GatewayError(status: 403, code: "forbidden", message: "the device's attestation has been revoked")

    static let routeNotFound = GatewayError(status: 404, code: "not_found", message: "no tenant route matches this request")

    static let upstreamUnavailable = GatewayError(
        status: 502, code: "upstream_unavailable", message: "the upstream could not be reached or answered badly")

    static let upstreamTimeout = GatewayError(status: 504, code: "upstream_timeout", message: "the upstream did not answer in time")
}
