import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Testing

@Suite("Apple's Platform SSO encryption walkthrough, step by step")
struct AppleVectorTests {
    static let vector = AppleVector.shared

    @Test("the three keys rebuild from d, and their kids follow Apple's rule", arguments: ["signing", "encryption", "ephemeral"])
    func keys(name: String) throws {
        let key = switch name {
        case "signing": Self.vector.signingKey
        case "encryption": Self.vector.encryptionKey
        default: Self.vector.ephemeralKey
        }
        #expect(key.privateKey.publicKey.x == key.x && key.privateKey.publicKey.y == key.y)
        let kid = PlatformSSOKeyID(of: key.privateKey.publicKey)
        #expect(kid.canonical == key.kid)
        #expect(PlatformSSOKeyID(normalizing: key.kid) == kid)
    }

    @Test("the login request JWS verifies with the device signing key; its header and claims are Apple's")
    func loginRequest() throws {
        let jws = try JWSCompact(parsing: Self.vector.loginRequestJWS)
        #expect(jws.header.algorithm == "ES256" && jws.header.type == "JWT")
        #expect(jws.header.keyID == Self.vector.signingKey.kid)
        #expect(jws.header.members["x5c"]?.stringValue?.isEmpty == false)
        #expect(jws.signature.count == 64)
        try jws.verify(with: .es256(Self.vector.signingKey.privateKey.publicKey))
        #expect(throws: JOSEError.invalidSignature) { try jws.verify(with: .es256(Self.vector.encryptionKey.privateKey.publicKey)) }
        #expect(try JSONValue(parsing: jws.payload) == Self.vector.loginRequestClaims)
        // Apple's encoding habits: pretty-printed JSON, times as strings.
        #expect(String(decoding: jws.payload.prefix(2), as: UTF8.self) == "{\n")
        #expect(Self.vector.loginRequestClaims["iat"] == "1656005132")
    }

    @Test("it is a login request, so the refresh verifier refuses it as another grant type")
    func loginIsNotRefresh() {
        let verifier = RefreshRequestVerifier(settings: .test)
        #expect(throws: OAuthError.unsupportedGrantType("JWS typ must be platformsso-refresh-request+jwt")) {
            try verifier.parse(Self.vector.loginRequestJWS)
        }
    }

    @Test("Z, apu, apv, the Concat KDF input and the content key reproduce exactly")
    func keyDerivation() throws {
        let ephemeral = Self.vector.ephemeralKey.privateKey, device = Self.vector.encryptionKey.privateKey
        let z = try ephemeral.sharedSecretFromKeyAgreement(with: device.publicKey)
        #expect(z == Self.vector.sharedSecret)
        #expect(try device.sharedSecretFromKeyAgreement(with: ephemeral.publicKey) == z)

        #expect(ApplePartyInfo.partyUInfo(ephemeralKey: ephemeral.publicKey) == Self.vector.partyUInfo)
        let claimsAPV = Self.vector.loginRequestClaims["jwe_crypto"]!["apv"]!.stringValue!
        #expect(Base64.decodeURL(claimsAPV) == Self.vector.partyVInfo)
        let apv = try ApplePartyInfo.parsePartyVInfo(Self.vector.partyVInfo)
        #expect(apv.encryptionKey == device.publicKey.x963Representation)
        #expect(apv.nonce == Array(Self.vector.loginRequestClaims["nonce"]!.stringValue!.utf8))
        #expect(ApplePartyInfo.partyVInfo(encryptionKey: device.publicKey, nonce: apv.nonce) == Self.vector.partyVInfo)

        let otherInfo = ConcatKDF.otherInfo(algorithmID: "A256GCM", partyUInfo: Self.vector.partyUInfo,
                                            partyVInfo: Self.vector.partyVInfo, keyBitLength: 256)
        #expect([0, 0, 0, 1] + z + otherInfo == Self.vector.kdfInput)
        #expect(SHA256.hash(Self.vector.kdfInput) == Self.vector.contentKey)
        #expect(ConcatKDF.deriveKey(sharedSecret: z, algorithmID: "A256GCM", partyUInfo: Self.vector.partyUInfo,
                                    partyVInfo: Self.vector.partyVInfo, keyBitLength: 256) == Self.vector.contentKey)
    }

    @Test("the compact response JWE decrypts to exactly the published plaintext, with the request's apv")
    func responseDecrypts() throws {
        let jwe = try JWECompact(parsing: Self.vector.responseJWE)
        #expect(jwe.header.algorithm == "ECDH-ES" && jwe.header.encryption == "A256GCM" && jwe.header.type == "JWT")
        #expect(jwe.header.keyID == Self.vector.encryptionKey.kid)
        #expect(jwe.header.ephemeralPublicKey == Self.vector.ephemeralKey.privateKey.publicKey)
        #expect(jwe.header.partyUInfo == Self.vector.partyUInfo)
        #expect(jwe.header.partyVInfo == nil, "Apple's response header carries no apv")
        let plaintext = try jwe.decrypt(with: Self.vector.encryptionKey.privateKey, expectedPartyVInfo: Self.vector.partyVInfo)
        #expect(try JSONValue(parsing: plaintext) == Self.vector.responsePlaintext)
        // The content key alone opens it too: the KDF above is the one the response used.
        let opened = try AES256GCM.open(AES256GCM.SealedBox(ciphertext: jwe.ciphertext, tag: jwe.tag),
                                        key: Self.vector.contentKey, iv: jwe.iv, authenticating: jwe.protectedHeader)
        #expect(opened == plaintext)
        // Without the request's apv the key differs.
        #expect(throws: JWEError.decryptionFailed) { try jwe.decrypt(with: Self.vector.encryptionKey.privateKey) }
    }

    @Test("our JWE with the vector's ephemeral key has Apple's apu and content key")
    func ourJWE() throws {
        let ephemeral = Self.vector.ephemeralKey.privateKey
        let plaintext = Array(#"{"token_type":"Bearer"}"#.utf8)
        let token = try JWECompact.encrypt(plaintext, to: Self.vector.encryptionKey.privateKey.publicKey, ephemeralKey: ephemeral,
                                           partyUInfo: ApplePartyInfo.partyUInfo(ephemeralKey: ephemeral.publicKey),
                                           partyVInfo: Self.vector.partyVInfo, keyID: Self.vector.encryptionKey.kid, type: "JWT")
        let jwe = try JWECompact(parsing: token)
        #expect(jwe.header.partyUInfo == Self.vector.partyUInfo && jwe.header.partyVInfo == Self.vector.partyVInfo)
        #expect(jwe.header.members["epk"] == ["kty": "EC", "crv": "P-256", "x": .string(Base64.encodeURL(Self.vector.ephemeralKey.x)),
                                              "y": .string(Base64.encodeURL(Self.vector.ephemeralKey.y))])
        let opened = try AES256GCM.open(AES256GCM.SealedBox(ciphertext: jwe.ciphertext, tag: jwe.tag),
                                        key: Self.vector.contentKey, iv: jwe.iv, authenticating: jwe.protectedHeader)
        #expect(opened == plaintext)
        #expect(try jwe.decrypt(with: Self.vector.encryptionKey.privateKey, expectedPartyVInfo: Self.vector.partyVInfo) == plaintext)
    }

    @Test("a refresh request from the vector's device gets a response with Apple's apu and content key")
    func builderWithVectorKeys() throws {
        let nonce = Self.vector.loginRequestClaims["nonce"]!.stringValue!
        let device = MacDevice(signingKey: Self.vector.signingKey.privateKey, encryptionKey: Self.vector.encryptionKey.privateKey)
        let request = MacRefreshRequest(device: device, nonce: nonce)
        let verifier = RefreshRequestVerifier(settings: .test)
        let verified = try verifier.verify(try verifier.parse(try request.compact()), device: device.keys, now: MacRefreshRequest.now)
        #expect(verified.partyVInfo == Self.vector.partyVInfo)
        let builder = LoginResponseBuilder(settings: .test, signer: JWTSigner(key: .es256(try P256.PrivateKey()), keyID: "gw-1"))
        let user = try PlatformSSOUser(subject: "foo")
        let token = try builder.response(for: verified, device: device.keys, user: user, refreshToken: "next", refreshTokenExpiresIn: 60,
                                         now: MacRefreshRequest.now, type: .json, ephemeralKey: Self.vector.ephemeralKey.privateKey)
        let jwe = try JWECompact(parsing: token)
        #expect(jwe.header.keyID == Self.vector.encryptionKey.kid && jwe.header.type == "JWT")
        #expect(jwe.header.partyUInfo == Self.vector.partyUInfo)
        _ = try AES256GCM.open(AES256GCM.SealedBox(ciphertext: jwe.ciphertext, tag: jwe.tag), key: Self.vector.contentKey,
                               iv: jwe.iv, authenticating: jwe.protectedHeader)
    }

    /// The hex example of `../shared/reference/platform-sso.md` (another EPK and nonce than the vector).
    @Test("the reference's hex KDF input parses into Apple's fields and hashes to its content key")
    func referenceHex() throws {
        let input = hex("000000013491708C92422BB807EDF2B8183A42737C5DAA6C39BA9535321D51C836D7ADA1000000074132353647434D00"
                        + "00004E000000054150504C45000000410406414745842895EAB7F4BA651AA95C9AC11D9F0EB8C34C1B71B1C0123ACCE2"
                        + "9C8DB3A85996E00C54C47CB6B53BFED9B89CB747C7765C0C340875942A624BB1B500000076000000054170706C650000"
                        + "00410499C272AF606A5101E5B1C686A164F0FF840DC4352A235951D75902440CCB26493FF98BB592A830C0B71BC3ED46"
                        + "578ACE6D5CE43D1A7CF657FFAD6CEF40B1EF920000002442374631464333322D393132312D344532412D394533322D38"
                        + "343137453033363735444400000100")
        let contentKey = hex("A146E4A23BDA2E53826C04D2F442BCFBD87BC2719D74B8A7DA00AF976267712E")
        let z = Array(input[4..<36])
        let apu = Array(input[51..<129]), apv = Array(input[133..<251])
        let epk = try P256.PublicKey(x963Representation: Array(apu[13...]))
        #expect(ApplePartyInfo.partyUInfo(ephemeralKey: epk) == apu)
        let parsed = try ApplePartyInfo.parsePartyVInfo(apv)
        #expect(String(decoding: parsed.nonce, as: UTF8.self) == "B7F1FC32-9121-4E2A-9E32-8417E03675DD")
        _ = try P256.PublicKey(x963Representation: parsed.encryptionKey)
        let otherInfo = ConcatKDF.otherInfo(algorithmID: "A256GCM", partyUInfo: apu, partyVInfo: apv, keyBitLength: 256)
        #expect([0, 0, 0, 1] + z + otherInfo == input)
        #expect(ConcatKDF.deriveKey(sharedSecret: z, algorithmID: "A256GCM", partyUInfo: apu, partyVInfo: apv,
                                    keyBitLength: 256) == contentKey)
    }
}
