public import AGFormats
internal import AGCrypto

/// Signs JWTs with one key under one `kid`.
public struct JWTSigner: Sendable {
    public let key: JWSSigningKey
    public let keyID: String
    /// The encoded `{"alg","kid","typ":"JWT"}` header, built once rather than per token.
    private let jwtHeader: [UInt8]

    public init(key: JWSSigningKey, keyID: String) {
        self.key = key
        self.keyID = keyID
        jwtHeader = JWSCompact.encodedHeader(["alg": .string(key.algorithm.rawValue), "kid": .string(keyID), "typ": .string("JWT")])
    }

    public var algorithm: JWSAlgorithm { key.algorithm }

    /// A compact JWS over the compact JSON of `claims`, header `{"alg","kid","typ":"JWT"}`.
    public func sign(claims: [String: JSONValue]) throws(JOSEError) -> String {
        try sign(payload: JSONValue.object(claims).serialized())
    }

    /// A compact JWS over `payload` (already serialized JSON), header `{"alg","kid","typ"}`.
    public func sign(payload: [UInt8], type: String = "JWT") throws(JOSEError) -> String {
        if type == "JWT" { return try JWSCompact.sign(encodedHeader: jwtHeader, payload: payload, key: key) }
        return try JWSCompact.sign(payload: payload, key: key, keyID: keyID, type: type)
    }
}

/// A JWT whose signature has been verified.
public struct VerifiedJWT: Sendable {
    public let header: JWSHeader
    /// The payload exactly as signed (for forwarding verbatim).
    public let payload: [UInt8]
    /// The payload parsed as a JSON object.
    public let claims: [String: JSONValue]
}

/// Verifies JWTs against a fixed set of keys selected by `kid`.
///
/// The key, never the token, decides the algorithm: `alg` must equal the selected key's
/// algorithm, so `none`, HMAC algorithms and RS256/ES256 substitution all fail.
public struct JWTVerifier: Sendable {
    public let keys: [String: JWSVerificationKey]
    /// Tokens longer than this are refused before any decoding.
    public var maximumTokenLength: Int
    /// Refuse an ES256 signature whose `s` is above n/2: for keys whose signer always writes
    /// low-S (the gateway's own), so that a token has one spelling — its twin with `n − s`
    /// verifies too, and would otherwise be a second token for caches and logs.
    public var requiresLowS = false

    public init(keys: [String: JWSVerificationKey], maximumTokenLength: Int = 16 * 1024) {
        self.keys = keys
        self.maximumTokenLength = maximumTokenLength
    }

    /// Verifies `token` and parses its claims. `expectedType` is matched with the header's
    /// `typ` by `JWSHeader.hasType`; pass nil to accept any or no `typ`.
    ///
    /// Time claims (`exp`, `nbf`) are not checked here; see `VerifiedJWT.checkValidity(at:leeway:)`.
    public func verify(_ token: String, expectedType: String? = "JWT") throws(JOSEError) -> VerifiedJWT {
        let jws = try JWSCompact(parsing: token, maximumLength: maximumTokenLength)
        guard JWSAlgorithm(rawValue: jws.header.algorithm) != nil else {
            throw .unsupportedAlgorithm(jws.header.algorithm)
        }
        if let expectedType {
            guard jws.header.hasType(expectedType) else { throw .unexpectedType(jws.header.type) }
        }
        guard let keyID = jws.header.keyID, let key = keys[keyID] else { throw .unknownKeyID(jws.header.keyID) }
        try jws.verify(with: key)
        if requiresLowS, case .es256 = key, !P256.isLowS(rawSignature: jws.signature) { throw .invalidSignature }
        guard let json = try? JSONValue(parsing: jws.payload), case .object(let claims) = json else {
            throw .malformed("payload is not a JSON object")
        }
        return VerifiedJWT(header: jws.header, payload: jws.payload, claims: claims)
    }
}

/// Why a verified JWT is not (or no longer) valid at a given time.
public enum JWTValidityError: Error, Sendable, Equatable {
    /// `exp` + leeway is not after `now`.
    case expired
    /// `nbf` − leeway is after `now`.
    case notYetValid
    /// `exp`, `nbf` or `iat` is present but not a number.
    case malformedTimeClaim(String)
}

extension VerifiedJWT {
    /// Checks `exp` and `nbf` (NumericDate seconds) against `now` (Unix seconds) with `leeway`
    /// seconds of tolerance; a missing `exp` fails only when `requireExpiry` is set.
    public func checkValidity(now: Double, leeway: Double, requireExpiry: Bool = true) throws(JWTValidityError) {
        func time(_ name: String) throws(JWTValidityError) -> Double? {
            guard let value = claims[name] else { return nil }
            guard let seconds = value.doubleValue else { throw .malformedTimeClaim(name) }
            return seconds
        }
        if let expiry = try time("exp") {
            guard now < expiry + leeway else { throw .expired }
        } else if requireExpiry {
            throw .malformedTimeClaim("exp")
        }
        if let notBefore = try time("nbf") {
            guard now >= notBefore - leeway else { throw .notYetValid }
        }
        _ = try time("iat")
    }
}
