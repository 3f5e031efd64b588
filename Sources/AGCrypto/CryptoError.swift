internal import COpenSSL

/// A failure inside an OpenSSL operation, carrying the library's own error code and text.
///
/// `code` is the first entry of OpenSSL's thread-local error queue (`ERR_get_error`) when the
/// library reported one, or, for X.509 verification, the `X509_V_ERR_*` code; it is 0 when the
/// input was rejected by this wrapper before reaching OpenSSL.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The wrapper operation that failed, for example `"P256.PublicKey(pem:)"`.
    public let operation: String
    /// OpenSSL's packed error code, an `X509_V_ERR_*` code, or 0.
    public let code: UInt
    /// OpenSSL's error string or this wrapper's explanation.
    public let reason: String

    public init(operation: String, code: UInt, reason: String) {
        self.operation = operation
        self.code = code
        self.reason = reason
    }

    public var description: String {
        code == 0 ? "\(operation): \(reason)" : "\(operation): \(reason) (code \(code))"
    }

    /// Input rejected by the wrapper itself.
    package static func invalidInput(_ operation: String, _ reason: String) -> CryptoError {
        ERR_clear_error()
        return CryptoError(operation: operation, code: 0, reason: reason)
    }

    /// Takes the oldest error off OpenSSL's queue and clears the rest, so that a failure never
    /// leaks into the next operation on the same thread.
    package static func openSSL(_ operation: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else {
            return CryptoError(operation: operation, code: 0, reason: "OpenSSL reported failure without an error code")
        }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let reason = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return CryptoError(operation: operation, code: code, reason: reason)
    }
}
