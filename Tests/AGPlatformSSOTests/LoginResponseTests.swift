import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Testing

enum ResponseFixture {
    static let tokenKey = try! P256.PrivateKey()
    static let signer = JWTSigner(key: .es256(tokenKey), keyID: "gw-1")
    static let builder = LoginResponseBuilder(settings: .test, signer: signer)
    static let user = try! PlatformSSOUser(subject: "user-42", claims: ["upn": "foo@example.com", "groups": ["a", "b"]])

    static func verified(_ device: MacDevice = Verification.device) throws -> VerifiedRefreshRequest {
        let verifier = RefreshRequestVerifier(settings: .test)
        return try verifier.verify(try verifier.parse(try MacRefreshRequest(device: device).compact()), device: device.keys,
                                   now: MacRefreshRequest.now)
    }

    static func response(type: LoginResponseType = .loginResponse, device: MacDevice = Verification.device) throws -> String {
        try builder.response(for: try verified(device), device: device.keys, user: user, refreshToken: "next-token",
                             refreshTokenExpiresIn: 1_209_000, now: MacRefreshRequest.now, type: type)
    }
}

@Suite("Login response building")
struct LoginResponseTests {
    @Test("the JWE header is exactly section 11's, with the requested typ", arguments: [
        (LoginResponseType.loginResponse, "platformsso-login-response+jwt"), (.json, "JWT"),
    ])
    func header(type: LoginResponseType, typ: String) throws {
        let jwe = try JWECompact(parsing: try ResponseFixture.response(type: type))
        let members = jwe.header.members
        #expect(Set(members.keys) == ["alg", "enc", "epk", "apu", "apv", "typ", "kid"])
        #expect(members["alg"] == "ECDH-ES" && members["enc"] == "A256GCM" && members["typ"] == .string(typ))
        #expect(members["kid"] == .string(PlatformSSOKeyID(of: Verification.device.encryptionKey.publicKey).canonical))
        // The request's apv, spelled as the request spelled it.
        let request = MacRefreshRequest(device: Verification.device)
        #expect(members["apv"] == request.claims["jwe_crypto"]!["apv"])
        // What the Mac checks: apu's second field is the epk as a 65-byte point.
        let epk = try #require(jwe.header.ephemeralPublicKey)
        let apu = try #require(jwe.header.partyUInfo)
        let parsedAPU = try parseFields(apu)
        #expect(parsedAPU.count == 2 && parsedAPU[0] == Array("APPLE".utf8) && parsedAPU[1] == epk.x963Representation)
        #expect(Set(members["epk"]!.objectValue!.keys) == ["kty", "crv", "x", "y"])
        #expect(jwe.iv.count == 12 && jwe.tag.count == 16 && jwe.encryptedKey.isEmpty)
    }

    @Test("the plaintext has the five members and an id_token the gateway's JWKS verifies")
    func plaintext() throws {
        let verified = try ResponseFixture.verified()
        let jwe = try JWECompact(parsing: try ResponseFixture.response())
        let plaintext = try jwe.decrypt(with: Verification.device.encryptionKey, expectedPartyVInfo: verified.partyVInfo)
        let body = try JSONValue(parsing: plaintext).objectValue!
        #expect(Set(body.keys) == ["id_token", "refresh_token", "token_type", "expires_in", "refresh_token_expires_in"])
        #expect(body["refresh_token"] == "next-token" && body["token_type"] == "Bearer")
        #expect(body["expires_in"] == 28_800 && body["refresh_token_expires_in"] == 1_209_000)

        let verifier = JWTVerifier(keys: ["gw-1": ResponseFixture.signer.key.verificationKey])
        let idToken = try verifier.verify(body["id_token"]!.stringValue!)
        #expect(idToken.header.keyID == "gw-1" && idToken.header.type == "JWT" && idToken.header.algorithm == "ES256")
        let now = MacRefreshRequest.now
        let expected: [String: JSONValue] = [
            "iss": "https://gateway.example.com", "aud": .string(MacRefreshRequest.clientID), "sub": "user-42",
            "iat": .integer(now), "nbf": .integer(now), "exp": .integer(now + 28_800),
            "nonce": "A978348D-DEDF-4AF2-94D4-FCC60B6736D0", "upn": "foo@example.com", "groups": ["a", "b"],
        ]
        #expect(idToken.claims == expected)
        let signature = Base64.decodeURL(body["id_token"]!.stringValue!.split(separator: ".")[2])!
        #expect(P256.isLowS(rawSignature: signature))
    }

    @Test("the device's other keys, or another device, cannot decrypt it")
    func onlyTheDevice() throws {
        let verified = try ResponseFixture.verified()
        let jwe = try JWECompact(parsing: try ResponseFixture.response())
        #expect(throws: JWEError.decryptionFailed) {
            try jwe.decrypt(with: Verification.device.signingKey, expectedPartyVInfo: verified.partyVInfo)
        }
        #expect(throws: JWEError.decryptionFailed) {
            try jwe.decrypt(with: Verification.otherDevice.encryptionKey, expectedPartyVInfo: verified.partyVInfo)
        }
    }

    @Test("every response has a fresh ephemeral key and IV")
    func fresh() throws {
        let first = try JWECompact(parsing: try ResponseFixture.response())
        let second = try JWECompact(parsing: try ResponseFixture.response())
        #expect(first.header.ephemeralPublicKey != second.header.ephemeralPublicKey && first.iv != second.iv)
    }

    @Test("an RS256 token key signs the id_token just as well")
    func rs256() throws {
        let signer = JWTSigner(key: .rs256(try RSAKey.PrivateKey(bits: 2048)), keyID: "gw-rsa")
        let builder = LoginResponseBuilder(settings: .test, signer: signer)
        let verified = try ResponseFixture.verified()
        let token = try builder.response(for: verified, device: Verification.device.keys, user: ResponseFixture.user,
                                         refreshToken: "t", refreshTokenExpiresIn: 1, now: MacRefreshRequest.now)
        let plaintext = try JWECompact(parsing: token).decrypt(with: Verification.device.encryptionKey)
        let idToken = try JSONValue(parsing: plaintext)["id_token"]!.stringValue!
        #expect(try JWTVerifier(keys: ["gw-rsa": signer.key.verificationKey]).verify(idToken).claims["sub"] == "user-42")
    }

    @Test("registered claims may not use a reserved name", arguments: ["iss", "aud", "sub", "iat", "nbf", "exp", "nonce", "azp"])
    func reservedClaims(name: String) {
        #expect(throws: PlatformSSOUserError("claim \(name) is set by the gateway and cannot be registered")) {
            try PlatformSSOUser(subject: "u", claims: [name: "x", "upn": "y"])
        }
    }

    @Test("an empty sub is refused")
    func emptySubject() {
        #expect(throws: PlatformSSOUserError("sub must not be empty")) { try PlatformSSOUser(subject: "") }
    }

    @Test("Accept picks the typ", arguments: [
        (nil, LoginResponseType.loginResponse),
        ("application/platformsso-login-response+jwt", .loginResponse),
        ("application/json", .json),
        ("Application/JSON; charset=utf-8", .json),
        ("text/html, application/json;q=0.9", .json),
        ("application/json, application/platformsso-login-response+jwt", .loginResponse),
        ("*/*", .loginResponse),
        ("", .loginResponse),
    ] as [(String?, LoginResponseType)])
    func accept(header: String?, type: LoginResponseType) {
        #expect(LoginResponseType(accept: header) == type)
    }

    /// Splits `len || data` fields.
    private func parseFields(_ bytes: [UInt8]) throws -> [[UInt8]] {
        var fields: [[UInt8]] = []
        var offset = 0
        while offset < bytes.count {
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            try #require(offset + length <= bytes.count)
            fields.append(Array(bytes[offset..<offset + length]))
            offset += length
        }
        return fields
    }
}

@Suite("OAuth errors")
struct OAuthErrorTests {
    @Test("each section 11 refusal has its status and code", arguments: [
        (OAuthError.invalidRequest("x"), 400, "invalid_request"),
        (.invalidGrant("x"), 401, "invalid_grant"),
        (.unsupportedGrantType("x"), 400, "unsupported_grant_type"),
        (.signatureInvalid, 401, "invalid_grant"),
        (.deviceUnknown, 401, "invalid_grant"),
        (.deviceDisabled, 401, "invalid_grant"),
        (.refreshToken(.unknown), 401, "invalid_grant"),
        (.refreshToken(.expired), 401, "invalid_grant"),
        (.refreshToken(.revoked), 401, "invalid_grant"),
        (.refreshToken(.reused), 401, "invalid_grant"),
        (.nonce(.unknown), 400, "invalid_grant"),
        (.nonce(.expired), 400, "invalid_grant"),
        (.nonce(.used), 400, "invalid_grant"),
        (.rateLimited(retryAfter: 3), 429, "rate_limited"),
        (.temporarilyUnavailable, 503, "temporarily_unavailable"),
        (.serverError("x"), 500, "server_error"),
    ] as [(OAuthError, Int, String)])
    func codes(error: OAuthError, status: Int, code: String) {
        #expect(error.status == status && error.code == code)
    }

    @Test("nonce problems say nonce, refresh token problems say refresh token")
    func descriptions() {
        for problem in OAuthError.NonceProblem.allCases {
            #expect(OAuthError.nonce(problem).reason.hasPrefix("nonce "))
        }
        for problem in OAuthError.RefreshTokenProblem.allCases {
            #expect(OAuthError.refreshToken(problem).reason.hasPrefix("refresh token "))
        }
    }

    @Test("the body is the OAuth envelope with the request id; Retry-After only when rate limited")
    func body() throws {
        let body = try JSONValue(parsing: OAuthError.nonce(.used).body(requestID: "req-1"))
        #expect(body == ["error": "invalid_grant", "error_description": "nonce already used", "requestId": "req-1"])
        #expect(OAuthError.rateLimited(retryAfter: 0).retryAfter == 1)
        #expect(OAuthError.rateLimited(retryAfter: 7).retryAfter == 7)
        #expect(OAuthError.signatureInvalid.retryAfter == nil)
    }
}
