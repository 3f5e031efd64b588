public import AGCrypto
import AGHTTP

/// An error envelope (`{"error", "code", "requestId"}`) the gateway or admin API answered with.
public struct GatewayRejection: Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    /// The envelope's stable `code`; `http_<status>` when the body was not an envelope.
    public let code: String
    /// The envelope's `error` text, or the start of the body when it was not an envelope.
    public let message: String
    public let requestID: String?
    /// The request that was refused, `METHOD /path`, when known.
    public let request: String?

    public init(status: Int, code: String, message: String, requestID: String?, request: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.requestID = requestID
        self.request = request
    }

    /// Whether the gateway no longer accepts the device key (refresh answered `not_found`,
    /// `forbidden` or `reattest_required`): the key must be replaced.
    public var requiresNewKey: Bool {
        request == "POST \(DeviceSession.refreshPath)" && ["not_found", "forbidden", "reattest_required"].contains(code)
    }

    public var description: String {
        var text = request.map { "\($0) → " } ?? ""
        text += "\(status) \(code): \(message)"
        if let requestID { text += " (request \(requestID))" }
        if requiresNewKey { text += "; the gateway no longer accepts this key: delete the state file and register again" }
        return text
    }
}

/// Why a device operation failed.
public enum DeviceError: Error, Sendable, CustomStringConvertible {
    /// The gateway answered with an error status.
    case rejected(GatewayRejection)
    /// No complete HTTP response.
    case transport(HTTPClientError)
    /// A success status whose body is not what the contract promises.
    case unexpectedResponse(status: Int, reason: String)
    case crypto(CryptoError)
    /// The state file could not be read or written, or does not match the options.
    case state(path: String, reason: String)
    /// The assertion counter reached `UInt32.max`; the key must be replaced.
    case counterExhausted
    /// A required setting (admin URL, admin token, token) is missing.
    case configuration(String)

    /// HTTP status when the gateway answered.
    public var status: Int? {
        if case .rejected(let rejection) = self { return rejection.status }
        return nil
    }

    /// The envelope code when the gateway answered, otherwise a local kind (for counting).
    public var code: String {
        switch self {
        case .rejected(let rejection): rejection.code
        case .transport(let error): error.kind
        case .unexpectedResponse: "unexpected_response"
        case .crypto: "crypto_error"
        case .state: "state_error"
        case .counterExhausted: "counter_exhausted"
        case .configuration: "configuration_error"
        }
    }

    public var description: String {
        switch self {
        case .rejected(let rejection): "\(rejection)"
        case .transport(let error): "\(error)"
        case .unexpectedResponse(let status, let reason): "unexpected \(status) response: \(reason)"
        case .crypto(let error): "\(error)"
        case .state(let path, let reason): "\(path): \(reason)"
        case .counterExhausted: "the assertion counter is exhausted; register a new key"
        case .configuration(let reason): reason
        }
    }
}
