public import AGCrypto
public import AGFormats
internal import AGJOSE

/// Why a device key given to the admin API was refused.
public struct DeviceKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, for the operator (never contains key material).
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// Reads a device's P-256 public key (signing or encryption) in any of the forms IdPs hand
/// over: SPKI PEM (`PUBLIC KEY`), a raw 65-byte X9.63 point wrapped in PEM (`PUBLIC KEY` or
/// `EC PUBLIC KEY`), an EC JWK, or base64 of the X9.63 point (either alphabet, padding optional).
public enum DeviceKeyParser {
    /// A key given as a JSON value: a string (PEM or base64 X9.63) or an object (JWK).
    public static func parse(_ value: JSONValue) throws(DeviceKeyError) -> P256.PublicKey {
        switch value {
        case .string(let text): return try parse(text)
        case .object: return try parseJWK(value)
        default: throw DeviceKeyError("a key must be a PEM or base64 string or a JWK object")
        }
    }

    /// A key given as text: PEM, JWK JSON, or base64 X9.63.
    public static func parse(_ text: String) throws(DeviceKeyError) -> P256.PublicKey {
        let trimmed = trimmingWhitespace(text)
        if trimmed.hasPrefix("-----BEGIN ") { return try parsePEM(trimmed) }
        if trimmed.hasPrefix("{") {
            guard let json = try? JSONValue(parsing: trimmed, maximumDepth: 4) else {
                throw DeviceKeyError("the key looks like a JWK but is not valid JSON")
            }
            return try parseJWK(json)
        }
        guard let bytes = Base64.decodeEitherAlphabet(trimmed) else {
            throw DeviceKeyError("the key is not PEM, a JWK, or base64 of a 65-byte X9.63 point")
        }
        return try point(bytes, form: "base64 key")
    }

    private static func parseJWK(_ json: JSONValue) throws(DeviceKeyError) -> P256.PublicKey {
        do {
            return try P256.PublicKey(jwk: json)
        } catch {
            guard case .invalidKey(let reason) = error else { throw DeviceKeyError("invalid JWK") }
            throw DeviceKeyError("invalid JWK: " + reason)
        }
    }

    private static func parsePEM(_ text: String) throws(DeviceKeyError) -> P256.PublicKey {
        // "\r\n" is one Character in Swift, so both line endings are separators.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        guard lines.count >= 3, let first = lines.first, let last = lines.last,
              first.hasSuffix("-----"), last.hasPrefix("-----END "), last.hasSuffix("-----") else {
            throw DeviceKeyError("malformed PEM: expected BEGIN and END lines around base64")
        }
        let label = first.dropFirst("-----BEGIN ".count).dropLast(5)
        guard last.dropFirst("-----END ".count).dropLast(5) == label else {
            throw DeviceKeyError("malformed PEM: the END label does not match the BEGIN label")
        }
        guard label == "PUBLIC KEY" || label == "EC PUBLIC KEY" else {
            throw DeviceKeyError("PEM label must be PUBLIC KEY or EC PUBLIC KEY, not \(label)")
        }
        let body = lines.dropFirst().dropLast().joined()
        guard !body.contains(":"), let der = Base64.decode(body), !der.isEmpty else {
            throw DeviceKeyError("malformed PEM: the body is not base64")
        }
        if der.count == P256.x963ByteCount, der.first == 0x04 { return try point(der, form: "PEM point") }
        do {
            return try P256.PublicKey(derRepresentation: der)
        } catch {
            throw DeviceKeyError("PEM is neither a P-256 SubjectPublicKeyInfo nor a 65-byte X9.63 point")
        }
    }

    private static func point(_ bytes: [UInt8], form: String) throws(DeviceKeyError) -> P256.PublicKey {
        guard bytes.count == P256.x963ByteCount, bytes.first == 0x04 else {
            throw DeviceKeyError("\(form): expected a 65-byte uncompressed X9.63 point (04 || x || y), got \(bytes.count) bytes")
        }
        do {
            return try P256.PublicKey(x963Representation: bytes)
        } catch {
            throw DeviceKeyError("\(form): the point is not on P-256")
        }
    }

    private static func trimmingWhitespace(_ text: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\r\n" || $0 == "\r" || $0 == "\t" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
