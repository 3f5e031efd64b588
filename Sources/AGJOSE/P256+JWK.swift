public import AGFormats
public import AGCrypto

extension P256.PublicKey {
    /// The public JWK members `{"kty":"EC","crv":"P-256","x","y"}` (RFC 7518 §6.2.1), with both
    /// coordinates exactly 32 bytes: left-padded, as RFC 7518 requires and as a Mac checks (a
    /// key whose coordinate starts with a zero byte must not lose it).
    public var jwk: JSONValue {
        ["kty": "EC", "crv": "P-256", "x": .string(Base64.encodeURL(x)), "y": .string(Base64.encodeURL(y))]
    }

    /// A key from a public EC JWK: `kty EC`, `crv P-256`, `x` and `y` unpadded base64url of
    /// exactly 32 bytes each, a point on the curve, and no private member `d`. Other members
    /// (`kid`, `use`, `alg`, …) are left for the caller to judge.
    public init(jwk: JSONValue) throws(JOSEError) {
        guard case .object(let members) = jwk else { throw .invalidKey("a JWK must be a JSON object") }
        guard members["d"] == nil else { throw .invalidKey("a private JWK was given where a public key is expected") }
        guard members["kty"]?.stringValue == "EC" else { throw .invalidKey("kty must be EC") }
        guard members["crv"]?.stringValue == "P-256" else { throw .invalidKey("crv must be P-256") }
        func coordinate(_ name: String) throws(JOSEError) -> [UInt8] {
            guard let text = members[name]?.stringValue, let bytes = Base64.decodeURL(text) else {
                throw .invalidKey("\(name) must be an unpadded base64url string")
            }
            guard bytes.count == 32 else { throw .invalidKey("\(name) must be exactly 32 bytes, not \(bytes.count)") }
            return bytes
        }
        let x = try coordinate("x"), y = try coordinate("y")
        do {
            try self.init(x: x, y: y)
        } catch {
            throw .invalidKey("the point is not on P-256")
        }
    }
}
