/// Where a value was written (`gateway.yaml:12`, `server.tls.cert`): kept in the model for the
/// checks that can only run when a snapshot is built (a certificate that does not parse, a key
/// that does not match), so they still report `file:line: key.path: what is wrong`.
public struct ConfigLocation: Sendable, Hashable {
    public let file: String
    public let line: Int
    public let keyPath: String

    public init(file: String, line: Int, keyPath: String) {
        self.file = file
        self.line = line
        self.keyPath = keyPath
    }

    /// A problem at this location.
    public func problem(_ message: String) -> ConfigProblem {
        ConfigProblem(file: file, line: line, keyPath: keyPath, message: message)
    }
}

extension ConfigDecoder {
    /// The location of `field` in the file being decoded.
    public func location(of field: ConfigField) -> ConfigLocation {
        ConfigLocation(file: file, line: field.line, keyPath: field.path.description)
    }
}
