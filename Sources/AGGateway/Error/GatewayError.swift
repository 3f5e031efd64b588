import AGFormats
import AGHTTP

/// An error answered to a client: HTTP status, stable machine-readable code, message.
///
/// Every error response of the gateway is rendered from this one type, in the envelope
/// `{"error", "code", "requestId", "hint"?, …extra}`.
public struct GatewayError: Error, Sendable, Equatable {
    public var status: Int
    public var code: String
    public var message: String
    public var hint: String?
    /// Extra integer fields (`limit`, `current`).
    public var extra: [(String, Int)] = []
    /// Extra response headers (`Retry-After`, `WWW-Authenticate`).
    public var headers: [(String, String)] = []

    public init(status: Int, code: String, message: String, hint: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
    }

    public static func == (lhs: GatewayError, rhs: GatewayError) -> Bool {
        lhs.status == rhs.status && lhs.code == rhs.code && lhs.message == rhs.message
    }

    /// The JSON envelope body.
    public func body(requestID: String) -> [UInt8] {
        var json = JSONObjectWriter()
        json.add("error", message)
        json.add("code", code)
        json.add("requestId", requestID)
        json.add("hint", hint)
        for (key, value) in extra { json.add(key, value) }
        return json.finishedBytes()
    }

    /// The contract's 401s on the attestation routes, with the challenge RFC 9110 section
    /// 15.5.2 requires of every 401: `AppAttest` names what the client proves itself with (no
    /// registered HTTP scheme covers it; clients ignore a scheme they do not know).
    func challenging() -> GatewayError {
        var error = self
        error.headers = [("WWW-Authenticate", "AppAttest")]
        return error
    }

    // MARK: The contract's codes

    public static func badRequest(_ message: String, hint: String? = nil) -> GatewayError {
        GatewayError(status: 400, code: "bad_request", message: message, hint: hint)
    }
    public static let unknownTenant = GatewayError(
        status: 401, code: "unknown_tenant", message: "no tenant is configured for this X-Team-ID and X-Bundle-ID").challenging()
    public static let notFound = GatewayError(status: 404, code: "not_found", message: "no such resource")
    public static let methodNotAllowed = GatewayError(status: 405, code: "method_not_allowed", message: "method not allowed")
    public static func payloadTooLarge(limit: Int) -> GatewayError {
        var error = GatewayError(status: 413, code: "payload_too_large", message: "request body exceeds \(limit) bytes")
        error.extra = [("limit", limit)]
        return error
    }
    public static let storeUnavailable = GatewayError(
        status: 503, code: "store_unavailable", message: "the gateway's state store is unavailable, try again shortly")
    public static let internalError = GatewayError(status: 500, code: "internal_error", message: "internal error")
    public static let unauthorized = GatewayError(status: 401, code: "unauthorized", message: "missing or invalid admin token")
}
