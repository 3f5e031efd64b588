public import AGFormats
public import AGCrypto

/// The JWS algorithms this gateway signs and verifies with.
public enum JWSAlgorithm: String, Sendable, Equatable, CaseIterable {
    /// ECDSA P-256 with SHA-256; signatures are raw `r || s`.
    case es256 = "ES256"
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
}

/// A private key that signs JWS, tied to its algorithm.
public enum JWSSigningKey: Sendable {
    case es256(P256.PrivateKey)
    case rs256(RSAKey.PrivateKey)

    public var algorithm: JWSAlgorithm {
        switch self {
        case .es256: .es256
        case .rs256: .rs256
        }
    }

    /// The public key that verifies this key's signatures.
    public var verificationKey: JWSVerificationKey {
        switch self {
        case .es256(let key): .es256(key.publicKey)
        case .rs256(let key): .rs256(key.publicKey)
        }
    }

    /// The JWS signature (RFC 7518 §3) over `signingInput`.
    public func signature(for signingInput: [UInt8]) throws(JOSEError) -> [UInt8] {
        do {
            switch self {
            case .es256(let key): return try key.rawSignature(for: signingInput)
            case .rs256(let key): return try key.signature(for: signingInput)
            }
        } catch {
            throw .signingFailed(error.description)
        }
    }
}

/// A public key that verifies JWS, tied to its algorithm so that a token can never pick
/// how its own signature is checked.
public enum JWSVerificationKey: Sendable, Equatable {
    case es256(P256.PublicKey)
    case rs256(RSAKey.PublicKey)

    public var algorithm: JWSAlgorithm {
        switch self {
        case .es256: .es256
        case .rs256: .rs256
        }
    }

    /// Whether `signature` is this key's JWS signature over `signingInput`.
    ///
    /// ES256 takes only the raw form: exactly 64 bytes, `r || s` (RFC 7518 §3.4); a DER
    /// signature or any other length is invalid. Both `s` and `n − s` verify here: this generic
    /// check does not enforce low-S (see `P256.isLowS(rawSignature:)` for callers that must).
    public func isValidSignature(_ signature: [UInt8], for signingInput: [UInt8]) -> Bool {
        switch self {
        case .es256(let key): key.isValidSignature(rawSignature: signature, for: signingInput)
        case .rs256(let key): key.isValidSignature(signature, for: signingInput)
        }
    }
}
