import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Testing

/// One row of the verification table: how the Mac's request is altered and what the gateway answers.
struct VerifierCase: Sendable, CustomTestStringConvertible {
    let name: String
    let change: @Sendable (inout MacRefreshRequest) throws -> Void
    /// nil: accepted.
    let expected: (status: Int, code: String)?
    var testDescription: String { name }

    static func refused(_ name: String, _ status: Int, _ code: String,
                        _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
        VerifierCase(name: name, change: change, expected: (status, code))
    }

    static func accepted(_ name: String, _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
        VerifierCase(name: name, change: change, expected: nil)
    }
}

enum Verification {
    static let device = try! MacDevice()
    static let otherDevice = try! MacDevice()
    static let verifier = RefreshRequestVerifier(settings: .test)

    /// Both steps, as the gateway will run them: parse, look the device up by the normalised
    /// kid, verify.
    static func run(_ request: MacRefreshRequest, settings: PlatformSSOSettings = .test,
                    now: Int64 = MacRefreshRequest.now) throws(OAuthError) -> VerifiedRefreshRequest {
        let verifier = RefreshRequestVerifier(settings: settings)
        let jws: String
        do { jws = try request.compact() } catch { throw .serverError("test request could not be built") }
        let unverified = try verifier.parse(jws)
        let known = [device, otherDevice].first { PlatformSSOKeyID(of: $0.signingKey.publicKey) == unverified.keyID }
        guard let known else { throw .deviceUnknown }
        return try verifier.verify(unverified, device: known.keys, now: now)
    }

    static func outcome(of testCase: VerifierCase) throws -> (status: Int, code: String)? {
        var request = MacRefreshRequest(device: device)
        try testCase.change(&request)
        do {
            _ = try run(request)
            return nil
        } catch {
            return (error.status, error.code)
        }
    }
}

@Suite("Refresh request verification: the request checks of section 11")
struct RefreshVerifierTests {
    @Test("Apple's request is accepted and yields what the store needs")
    func accepted() throws {
        let request = MacRefreshRequest(device: Verification.device)
        let unverified = try Verification.verifier.parse(try request.compact())
        #expect(unverified.keyID == PlatformSSOKeyID(of: Verification.device.signingKey.publicKey))
        #expect(unverified.serverNonce == "srv-nonce-1" && unverified.refreshToken == "refresh-1")
        let verified = try Verification.verifier.verify(unverified, device: Verification.device.keys, now: MacRefreshRequest.now)
        #expect(verified.keyID == unverified.keyID && verified.serverNonce == "srv-nonce-1" && verified.refreshToken == "refresh-1")
        #expect(verified.nonce == "A978348D-DEDF-4AF2-94D4-FCC60B6736D0")
        #expect(verified.scopes == ["openid", "offline_access", "urn:apple:platformsso"])
        #expect(verified.audience == MacRefreshRequest.audience)
        #expect(verified.issuedAt == 1_700_000_000 && verified.expiresAt == 1_700_000_300)
        #expect(verified.partyVInfo == ApplePartyInfo.partyVInfo(encryptionKey: Verification.device.encryptionKey.publicKey,
                                                                 nonce: Array(verified.nonce.utf8)))
    }

    @Test("each change is accepted or refused with its status and OAuth code", arguments: VerifierTable.all)
    func table(testCase: VerifierCase) throws {
        let outcome = try Verification.outcome(of: testCase)
        if let expected = testCase.expected {
            #expect(outcome?.status == expected.status && outcome?.code == expected.code,
                    "\(testCase.name): got \(outcome.map { "\($0.status) \($0.code)" } ?? "accepted")")
        } else {
            #expect(outcome == nil, "\(testCase.name): refused with \(outcome.map { "\($0.status) \($0.code)" } ?? "")")
        }
    }

    @Test("the signature is checked before the claims: a forged request with a bad claim is a 401")
    func signatureFirst() throws {
        var request = MacRefreshRequest(device: Verification.device)
        request.claims["client_id"] = "someone else"
        request.signingKey = Verification.otherDevice.signingKey
        #expect(throws: OAuthError.signatureInvalid) { try Verification.run(request) }
    }

    @Test("a device record that is not the kid's is refused, even when its key signed the request")
    func recordMismatch() throws {
        var request = MacRefreshRequest(device: Verification.device)
        request.signingKey = Verification.otherDevice.signingKey
        let unverified = try Verification.verifier.parse(try request.compact())
        #expect(throws: OAuthError.deviceUnknown) {
            try Verification.verifier.verify(unverified, device: Verification.otherDevice.keys, now: MacRefreshRequest.now)
        }
    }

    @Test("the nonce claim name comes from the settings")
    func nonceClaimName() throws {
        var settings = PlatformSSOSettings.test
        settings.nonceClaimName = "srv_nonce"
        var request = MacRefreshRequest(device: Verification.device)
        #expect(throws: OAuthError.invalidRequest("claim srv_nonce is missing")) { try Verification.run(request, settings: settings) }
        request.claims["srv_nonce"] = "custom-nonce"
        #expect(try Verification.run(request, settings: settings).serverNonce == "custom-nonce")
    }

    @Test("a payload that is no JSON says so, with the reason: not \"not a JSON object\"")
    func payloadThatIsNoJSON() throws {
        var request = MacRefreshRequest(device: Verification.device)
        var nested: JSONValue = 1
        for _ in 0..<20 { nested = .array([nested]) }
        request.claims["custom"] = nested
        #expect(throws: OAuthError.invalidRequest(
            "the JWS payload is not valid JSON (at most 16 levels deep, no repeated member name): nesting too deep")) {
            _ = try Verification.run(request)
        }
    }

    @Test("refusals name the claim without echoing token values")
    func descriptions() throws {
        var request = MacRefreshRequest(device: Verification.device, refreshToken: "secret-refresh-token")
        request.claims["aud"] = "https://evil.example/secret-refresh-token"
        do {
            _ = try Verification.run(request)
            Issue.record("accepted a wrong aud")
        } catch {
            #expect(error == .invalidRequest("claim aud is not this endpoint"))
            #expect(!String(decoding: error.body(requestID: "r"), as: UTF8.self).contains("secret"))
        }
    }
}
