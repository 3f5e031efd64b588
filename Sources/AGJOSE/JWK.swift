public import AGFormats
internal import AGCrypto

extension JWSVerificationKey {
    /// The public JWK (RFC 7517) for this key with `kid`, `alg` and `use: sig`.
    public func jwk(keyID: String) -> JSONValue {
        var members: [String: JSONValue] = [
            "kid": .string(keyID),
            "alg": .string(algorithm.rawValue),
            "use": "sig",
        ]
        switch self {
        case .es256(let key):
            members.merge(key.jwk.objectValue ?? [:]) { _, new in new }
        case .rs256(let key):
            members["kty"] = "RSA"
            members["n"] = .string(Base64.encodeURL(key.modulus))
            members["e"] = .string(Base64.encodeURL(key.publicExponent))
        }
        return .object(members)
    }

    /// A key from a public JWK: `kty EC` with `crv P-256` (ES256) or `kty RSA` (RS256). When the
    /// JWK names an `alg`, it must match; private members (`d`, …) are refused.
    public init(jwk: JSONValue) throws(JOSEError) {
        guard case .object(let members) = jwk else { throw .invalidKey("a JWK must be a JSON object") }
        guard members["d"] == nil else { throw .invalidKey("a private JWK was given where a public key is expected") }
        func component(_ name: String) throws(JOSEError) -> [UInt8] {
            guard let text = members[name]?.stringValue, let bytes = Base64.decodeURL(text), !bytes.isEmpty else {
                throw .invalidKey("missing or invalid \(name)")
            }
            return bytes
        }
        let key: JWSVerificationKey
        do {
            switch members["kty"]?.stringValue {
            case "EC":
                key = .es256(try P256.PublicKey(jwk: jwk))
            case "RSA":
                key = .rs256(try RSAKey.PublicKey(modulus: try component("n"), publicExponent: try component("e")))
            default:
                throw JOSEError.invalidKey("unsupported kty")
            }
        } catch let error as JOSEError {
            throw error
        } catch {
            throw .invalidKey(String(describing: error))
        }
        if let alg = members["alg"] {
            guard alg.stringValue == key.algorithm.rawValue else { throw .invalidKey("alg does not match the key type") }
        }
        self = key
    }
}

/// A JSON Web Key Set document (RFC 7517 §5).
public enum JWKS {
    /// `{"keys":[…]}` with one public JWK per entry, in the given order.
    public static func document(_ keys: [(keyID: String, key: JWSVerificationKey)]) -> JSONValue {
        .object(["keys": .array(keys.map { $0.key.jwk(keyID: $0.keyID) })])
    }
}
