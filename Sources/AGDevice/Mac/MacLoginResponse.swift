public import AGFormats
import AGCrypto
import AGJOSE
import AGPlatformSSO

/// A login response decrypted and checked as a Mac checks it (`reference/platform-sso.md`,
/// "What the Mac sends and checks"): the JWE header (`alg`, `enc`, `typ`; `apu` present with
/// the `epk` as its second field; `apv`, when present, equal to the request's), decryption to the
/// device's encryption key, then the id_token: a `kid` found in the JWKS, whose EC coordinates
/// are 32 bytes, a signature that verifies, `iss`, `aud` (= client id, or a list holding it and
/// then `azp`), `nonce` and `iat`/`exp` within ±120 s.
public struct MacLoginResponse: Sendable {
    /// What the Mac was configured with.
    public struct Expectations: Sendable {
        public var issuer: String
        public var clientID: String
        /// The JWE `typ` asked for through `Accept`.
        public var type: String

        public init(issuer: String, clientID: String, type: String = "platformsso-login-response+jwt") {
            self.issuer = issuer
            self.clientID = clientID
            self.type = type
        }
    }

    /// The JWE protected header.
    public let header: JSONValue
    public let idTokenHeader: JSONValue
    public let idTokenClaims: JSONValue
    /// The new refresh token (a secret: never printed).
    public let refreshToken: String
    public let expiresIn: Int64
    public let refreshTokenExpiresIn: Int64

    /// Checks `jwe` at `now` (Unix seconds) against the `request` it answers; `jwks` is the
    /// gateway's `/.well-known/jwks.json`.
    public init(jwe: String, mac: SimulatedMac, request: MacRefreshRequest, jwks: JSONValue, expected: Expectations,
                now: Int64) throws(DeviceError) {
        func fail(_ reason: String) -> DeviceError { .unexpectedResponse(status: 200, reason: reason) }
        let compact: JWECompact
        let plaintext: [UInt8]
        do {
            compact = try JWECompact(parsing: jwe)
            let header = compact.header
            guard header.algorithm == "ECDH-ES", header.encryption == "A256GCM" else { throw fail("JWE alg/enc is not ECDH-ES/A256GCM") }
            guard header.type == expected.type else { throw fail("JWE typ is \(header.type ?? "missing"), not \(expected.type)") }
            guard let epk = header.ephemeralPublicKey, let apu = header.partyUInfo else { throw fail("JWE header lacks epk or apu") }
            guard Self.secondField(of: apu) == epk.x963Representation else { throw fail("apu does not carry the epk") }
            if let apv = header.partyVInfo, apv != request.partyVInfo { throw fail("apv differs from the request's") }
            plaintext = try compact.decrypt(with: mac.encryptionKey, expectedPartyVInfo: request.partyVInfo)
        } catch let error as DeviceError {
            throw error
        } catch {
            throw fail("the JWE does not decrypt: \(error)")
        }
        guard case .object(let body)? = try? JSONValue(parsing: plaintext),
              let idToken = body["id_token"]?.stringValue, let refreshToken = body["refresh_token"]?.stringValue,
              body["token_type"]?.stringValue == "Bearer", let expiresIn = body["expires_in"]?.integerValue,
              let refreshTokenExpiresIn = body["refresh_token_expires_in"]?.integerValue else {
            throw fail("the plaintext lacks id_token, refresh_token, token_type Bearer, expires_in or refresh_token_expires_in")
        }
        header = .object(compact.header.members)
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.refreshTokenExpiresIn = refreshTokenExpiresIn
        let verified: VerifiedJWT
        do {
            verified = try Self.verifier(jwks).verify(idToken)
        } catch {
            throw fail("the id_token does not verify with the gateway's JWKS: \(error)")
        }
        let claims = verified.claims
        idTokenHeader = .object(verified.header.members)
        idTokenClaims = .object(claims)
        guard claims["iss"]?.stringValue == expected.issuer else { throw fail("id_token iss is not \(expected.issuer)") }
        switch claims["aud"] {
        case .string(let audience)? where audience == expected.clientID: break
        case .array(let audiences)? where audiences.contains(.string(expected.clientID)) && claims["azp"] != nil: break
        default: throw fail("id_token aud is not the client id \(expected.clientID)")
        }
        if let nonce = claims["nonce"], nonce.stringValue != request.nonce { throw fail("id_token nonce is not the request's") }
        guard let iat = claims["iat"]?.doubleValue, let exp = claims["exp"]?.doubleValue,
              abs(iat - Double(now)) <= 120, exp + 120 >= Double(now) else {
            throw fail("id_token iat/exp are not within 120 s of now")
        }
    }

    /// A verifier holding every JWKS key whose JWK parses (EC keys need 32-byte coordinates).
    static func verifier(_ jwks: JSONValue) -> JWTVerifier {
        var keys: [String: JWSVerificationKey] = [:]
        for jwk in jwks["keys"]?.arrayValue ?? [] {
            if let kid = jwk["kid"]?.stringValue, let key = try? JWSVerificationKey(jwk: jwk) { keys[kid] = key }
        }
        return JWTVerifier(keys: keys)
    }

    /// The second length-prefixed field of a PartyUInfo (`len‖"APPLE"‖len‖epk`).
    static func secondField(of info: [UInt8]) -> [UInt8]? {
        var offset = 0
        var fields: [[UInt8]] = []
        while offset + 4 <= info.count {
            let length = info[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            guard length <= info.count - offset else { return nil }
            fields.append(Array(info[offset..<offset + length]))
            offset += length
        }
        guard offset == info.count, fields.count == 2, fields[0] == ApplePartyInfo.partyULabel else { return nil }
        return fields[1]
    }
}
