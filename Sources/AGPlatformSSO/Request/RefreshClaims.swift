internal import AGCrypto
internal import AGFormats

/// The claim checks of a refresh request, each failing with 400 `invalid_request` and a
/// description that names the claim.
struct RefreshClaims {
    let claims: [String: JSONValue]

    func string(_ name: String) throws(OAuthError) -> String {
        guard let value = claims[name] else { throw .invalidRequest("claim \(name) is missing") }
        guard let text = value.stringValue else { throw .invalidRequest("claim \(name) must be a string") }
        return text
    }

    func nonEmptyString(_ name: String) throws(OAuthError) -> String {
        let text = try string(name)
        guard !text.isEmpty else { throw .invalidRequest("claim \(name) must not be empty") }
        return text
    }

    func requireEqual(_ name: String, _ expected: String) throws(OAuthError) {
        guard try string(name) == expected else { throw .invalidRequest("claim \(name) has the wrong value") }
    }

    /// `aud`, a string or an array of strings, one of which must be in `accepted` (the configured
    /// audiences without query and fragment) once its own query and fragment are cut (a Mac
    /// sends the configured endpoint URL without them).
    func audience(in accepted: Set<String>) throws(OAuthError) -> String {
        let values: [String]
        switch claims["aud"] {
        case nil: throw .invalidRequest("claim aud is missing")
        case .string(let value)?: values = [value]
        case .array(let elements)? where !elements.isEmpty && elements.allSatisfy({ $0.stringValue != nil }):
            values = elements.compactMap(\.stringValue)
        default: throw .invalidRequest("claim aud must be a string or an array of strings")
        }
        guard let match = values.map(Self.withoutQueryAndFragment).first(where: accepted.contains) else {
            throw .invalidRequest("claim aud is not this endpoint")
        }
        return match
    }

    static func withoutQueryAndFragment(_ url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }

    /// `iat` and `exp` (and `nbf` when present) as NumericDate numbers or numeric strings:
    /// `iat <= now + skew`, `exp > now - skew`, `iat < exp <= iat + 300 s + skew`, `nbf <= now + skew`.
    func times(now: Int64, skew: Int64) throws(OAuthError) -> (issuedAt: Double, expiresAt: Double) {
        let now = Double(now), skew = Double(skew)
        let issuedAt = try time("iat"), expiresAt = try time("exp")
        guard issuedAt <= now + skew else { throw .invalidRequest("claim iat is in the future") }
        guard expiresAt > now - skew else { throw .invalidRequest("the request has expired (exp)") }
        guard expiresAt > issuedAt else { throw .invalidRequest("claim exp is not after iat") }
        guard expiresAt - issuedAt <= Double(PlatformSSOSettings.maximumRequestLifetime) + skew else {
            throw .invalidRequest("exp - iat exceeds \(PlatformSSOSettings.maximumRequestLifetime) s plus the clock skew")
        }
        if claims["nbf"] != nil {
            guard try time("nbf") <= now + skew else { throw .invalidRequest("claim nbf is in the future") }
        }
        return (issuedAt, expiresAt)
    }

    private func time(_ name: String) throws(OAuthError) -> Double {
        switch claims[name] {
        case nil:
            throw .invalidRequest("claim \(name) is missing")
        case .integer(let value)?:
            return Double(value)
        case .double(let value)? where value.isFinite:
            return value
        case .string(let text)?:
            // Apple's own examples send times as strings of digits.
            guard let value = Self.numericString(text) else {
                throw .invalidRequest("claim \(name) must be a number or a numeric string")
            }
            return value
        default:
            throw .invalidRequest("claim \(name) must be a number or a numeric string")
        }
    }

    /// Digits with an optional fraction (`1685750697`, `1685750697.25`), at most 20 characters;
    /// no sign, exponent, whitespace, `inf` or `nan`.
    static func numericString(_ text: String) -> Double? {
        let utf8 = Array(text.utf8)
        guard !utf8.isEmpty, utf8.count <= 20 else { return nil }
        let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else {
            return nil
        }
        return Double(text)
    }

    /// `scope`: space-separated, containing `openid`.
    func scopes() throws(OAuthError) -> [String] {
        let scopes = try string("scope").split(separator: " ").map(String.init)
        guard scopes.contains("openid") else { throw .invalidRequest("claim scope does not contain openid") }
        return scopes
    }

    /// `jwe_crypto = {alg: ECDH-ES, enc: A256GCM, apv}` where `apv` (unpadded base64url)
    /// parses as Apple's PartyVInfo naming the registered encryption key and the `nonce` claim.
    func partyVInfo(encryptionKey: P256.PublicKey, nonce: String) throws(OAuthError) -> [UInt8] {
        guard let value = claims["jwe_crypto"] else { throw .invalidRequest("claim jwe_crypto is missing") }
        guard case .object(let crypto) = value else { throw .invalidRequest("claim jwe_crypto must be an object") }
        guard crypto["alg"]?.stringValue == "ECDH-ES" else { throw .invalidRequest("jwe_crypto.alg must be ECDH-ES") }
        guard crypto["enc"]?.stringValue == "A256GCM" else { throw .invalidRequest("jwe_crypto.enc must be A256GCM") }
        guard let apv = crypto["apv"] else { throw .invalidRequest("jwe_crypto.apv is missing") }
        guard let text = apv.stringValue else { throw .invalidRequest("jwe_crypto.apv must be a string") }
        guard let bytes = Base64.decodeURL(text) else { throw .invalidRequest("jwe_crypto.apv is not unpadded base64url") }
        let info: ApplePartyInfo.PartyVInfo
        do {
            info = try ApplePartyInfo.parsePartyVInfo(bytes)
        } catch {
            throw .invalidRequest("jwe_crypto.apv: \(error.reason)")
        }
        guard info.encryptionKey == encryptionKey.x963Representation else {
            throw .invalidRequest("jwe_crypto.apv names another encryption key than the device's")
        }
        guard info.nonce == Array(nonce.utf8) else { throw .invalidRequest("jwe_crypto.apv nonce differs from the nonce claim") }
        return bytes
    }
}
