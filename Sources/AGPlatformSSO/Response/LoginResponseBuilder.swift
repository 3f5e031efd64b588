public import AGCrypto
public import AGFormats
public import AGJOSE

/// Which JWE `typ` the Mac asked for.
public enum LoginResponseType: Sendable, Equatable {
    /// `typ: platformsso-login-response+jwt` (macOS 14+, `Accept: application/platformsso-login-response+jwt`).
    case loginResponse
    /// `typ: JWT` (macOS 13 extensions, `Accept: application/json`).
    case json

    /// The JWE media type, sent as `Content-Type` whichever `typ` was asked for: section 11
    /// gives macOS 13 "the same body" with only the `typ` changed.
    public static let contentType = "application/platformsso-login-response+jwt"

    /// Chooses from an `Accept` header: `application/json` alone (no login-response type in the
    /// list) selects `.json`; anything else, a missing header included, `.loginResponse`.
    public init(accept: String?) {
        let types = (accept ?? "").split(separator: ",").map { range in
            String(range.prefix { $0 != ";" }.filter { $0 != " " && $0 != "\t" }).lowercased()
        }
        self = !types.contains("application/platformsso-login-response+jwt") && types.contains("application/json")
            ? .json : .loginResponse
    }

    /// The JWE header `typ`.
    public var headerType: String {
        switch self {
        case .loginResponse: "platformsso-login-response+jwt"
        case .json: "JWT"
        }
    }
}

/// Builds the encrypted login response to a verified refresh request (DESIGN section 11
/// "Response"): an id_token signed by the gateway's token key, wrapped with the new refresh
/// token in a compact JWE (ECDH-ES with a fresh ephemeral key, A256GCM) to the device's
/// encryption key.
public struct LoginResponseBuilder: Sendable {
    public let settings: PlatformSSOSettings
    /// The gateway's active token key and its `kid` (published in `/.well-known/jwks.json`).
    public let signer: JWTSigner

    public init(settings: PlatformSSOSettings, signer: JWTSigner) {
        self.settings = settings
        self.signer = signer
    }

    /// The id_token claims: the user's registered claims, then `iss`, `aud` (= client_id),
    /// `sub`, `iat`, `nbf`, `exp` and the request's `nonce`, which always win.
    public func idTokenClaims(for request: VerifiedRefreshRequest, user: PlatformSSOUser, now: Int64) -> [String: JSONValue] {
        var claims = user.claims
        claims["iss"] = .string(settings.issuer)
        claims["aud"] = .string(settings.clientID)
        claims["sub"] = .string(user.subject)
        claims["iat"] = .integer(now)
        claims["nbf"] = .integer(now)
        claims["exp"] = .integer(now + settings.idTokenLifetime)
        claims["nonce"] = .string(request.nonce)
        return claims
    }

    /// The compact JWE body.
    ///
    /// - Parameters:
    ///   - refreshToken: the successor token the store just minted.
    ///   - refreshTokenExpiresIn: seconds until that token's family expires.
    ///   - ephemeralKey: only for reproducing vectors in tests; a fresh one otherwise.
    ///   - iv: fresh random bytes (the serving path draws them from its worker's block of the
    ///     DRBG), a fixed one to reproduce vectors in tests, or nil for a fresh `RAND_bytes` one.
    public func response(for request: VerifiedRefreshRequest, device: PlatformSSODeviceKeys, user: PlatformSSOUser,
                         refreshToken: String, refreshTokenExpiresIn: Int64, now: Int64,
                         type: LoginResponseType = .loginResponse, ephemeralKey: P256.PrivateKey? = nil,
                         iv: [UInt8]? = nil) throws(OAuthError) -> String {
        let idToken: String
        do {
            idToken = try signer.sign(claims: idTokenClaims(for: request, user: user, now: now))
        } catch {
            throw .serverError("the id_token could not be signed")
        }
        let plaintext = JSONValue.object([
            "id_token": .string(idToken),
            "refresh_token": .string(refreshToken),
            "token_type": "Bearer",
            "expires_in": .integer(settings.idTokenLifetime),
            "refresh_token_expires_in": .integer(refreshTokenExpiresIn),
        ]).serialized()
        do {
            let ephemeral = try ephemeralKey ?? P256.PrivateKey()
            return try JWECompact.encrypt(
                plaintext, to: device.encryptionKey, ephemeralKey: ephemeral,
                partyUInfo: ApplePartyInfo.partyUInfo(ephemeralKey: ephemeral.publicKey),
                partyVInfo: request.partyVInfo, keyID: PlatformSSOKeyID(of: device.encryptionKey).canonical,
                type: type.headerType, iv: iv)
        } catch {
            throw .serverError("the response could not be encrypted")
        }
    }
}
