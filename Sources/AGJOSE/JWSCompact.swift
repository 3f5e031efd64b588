public import AGFormats

/// The protected header of a JWS.
public struct JWSHeader: Sendable, Equatable {
    /// `alg` exactly as written in the token.
    public let algorithm: String
    /// `kid`, when present.
    public let keyID: String?
    /// `typ`, when present.
    public let type: String?
    /// Every header member, including the ones above.
    public let members: [String: JSONValue]

    init(decoding bytes: [UInt8]) throws(JOSEError) {
        guard let json = try? JSONValue(parsing: bytes, maximumDepth: 8), case .object(let members) = json else {
            throw .malformed("header is not a JSON object")
        }
        guard let algorithm = members["alg"]?.stringValue else { throw .malformed("header has no alg string") }
        if let kid = members["kid"], kid.stringValue == nil { throw .malformed("kid is not a string") }
        if let typ = members["typ"], typ.stringValue == nil { throw .malformed("typ is not a string") }
        guard members["crit"] == nil else { throw .unsupportedCriticalHeader }
        self.algorithm = algorithm
        self.keyID = members["kid"]?.stringValue
        self.type = members["typ"]?.stringValue
        self.members = members
    }

    /// Whether `typ` names the media type `expected` (written without `application/`, e.g.
    /// `JWT`): compared case-insensitively, and with `application/` taken as prepended to a
    /// value without a `/` (RFC 7515 §4.1.9), so `jwt` and `application/JWT` both match.
    public func hasType(_ expected: String) -> Bool {
        guard let type else { return false }
        let prefix = "application/"
        var value = type.lowercased()
        if value.hasPrefix(prefix) {
            value.removeFirst(prefix.count)
            if value.contains("/") { return false }
        }
        return value == expected.lowercased()
    }
}

/// A JWS in compact serialization (RFC 7515 §7.1), split and decoded but not yet verified.
public struct JWSCompact: Sendable {
    public let header: JWSHeader
    /// The decoded payload bytes.
    public let payload: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]
    /// `BASE64URL(header) || '.' || BASE64URL(payload)`, the bytes the signature covers.
    public let signingInput: [UInt8]

    /// Splits and decodes `token`; refuses anything but three non-empty base64url segments
    /// whose header is a JSON object naming an `alg`.
    public init(parsing token: String, maximumLength: Int = 16 * 1024) throws(JOSEError) {
        var utf8 = Array(token.utf8)
        guard utf8.count <= maximumLength else { throw .malformed("token longer than \(maximumLength) bytes") }
        guard let firstDot = utf8.firstIndex(of: UInt8(ascii: ".")),
              let secondDot = utf8[(firstDot + 1)...].firstIndex(of: UInt8(ascii: ".")),
              !utf8[(secondDot + 1)...].contains(UInt8(ascii: ".")) else {
            throw .malformed("expected three dot-separated segments")
        }
        guard firstDot > 0, secondDot > firstDot + 1, secondDot < utf8.count - 1 else {
            throw .malformed("empty segment")
        }
        guard let headerBytes = Base64.decodeURL(utf8: utf8[..<firstDot]),
              let payload = Base64.decodeURL(utf8: utf8[(firstDot + 1)..<secondDot]),
              let signature = Base64.decodeURL(utf8: utf8[(secondDot + 1)...]) else {
            throw .malformed("segment is not unpadded base64url")
        }
        self.header = try JWSHeader(decoding: headerBytes)
        self.payload = payload
        self.signature = signature
        utf8.removeSubrange(secondDot...)
        self.signingInput = utf8
    }

    /// Checks that the header's `alg` is `key`'s algorithm and that the signature verifies.
    public func verify(with key: JWSVerificationKey) throws(JOSEError) {
        guard let algorithm = JWSAlgorithm(rawValue: header.algorithm) else {
            throw .unsupportedAlgorithm(header.algorithm)
        }
        guard algorithm == key.algorithm else { throw .algorithmMismatch(header: header.algorithm, key: key.algorithm) }
        guard key.isValidSignature(signature, for: signingInput) else { throw .invalidSignature }
    }

    /// Signs `payload` into a compact JWS with header `{"alg","kid","typ"}` (plus `extraHeader`).
    public static func sign(payload: [UInt8], key: JWSSigningKey, keyID: String?, type: String?,
                            extraHeader: [String: JSONValue] = [:]) throws(JOSEError) -> String {
        var members = extraHeader
        members["alg"] = .string(key.algorithm.rawValue)
        if let keyID { members["kid"] = .string(keyID) }
        if let type { members["typ"] = .string(type) }
        return try sign(encodedHeader: encodedHeader(members), payload: payload, key: key)
    }

    /// The first segment of a compact JWS: the base64url of the header's compact JSON.
    static func encodedHeader(_ members: [String: JSONValue]) -> [UInt8] {
        Array(Base64.encodeURL(JSONValue.object(members).serialized()).utf8)
    }

    /// Signs `payload` under an already encoded header (`encodedHeader`), so a signer that
    /// always uses the same header builds it once.
    static func sign(encodedHeader: [UInt8], payload: [UInt8], key: JWSSigningKey) throws(JOSEError) -> String {
        var signingInput = encodedHeader
        signingInput.reserveCapacity(encodedHeader.count + payload.count * 4 / 3 + 100)
        signingInput.append(UInt8(ascii: "."))
        signingInput.append(contentsOf: Base64.encodeURL(payload).utf8)
        let signature = try key.signature(for: signingInput)
        signingInput.append(UInt8(ascii: "."))
        signingInput.append(contentsOf: Base64.encodeURL(signature).utf8)
        return String(decoding: signingInput, as: UTF8.self)
    }
}
