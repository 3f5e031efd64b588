import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Foundation
import Testing

/// Runs a fixture script with python3 (jwcrypto and cryptography are installed by
/// `scripts/test`); returns its exit status, stdout and stderr.
private func python(_ script: String, _ arguments: [String]) throws -> (status: Int32, output: [UInt8], error: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", AppleVector.fixturePath(script)] + arguments
    let output = Pipe(), error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorData = error.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, [UInt8](data), String(decoding: errorData, as: UTF8.self))
}

@Suite("Interop with an independent JOSE implementation (Python jwcrypto)")
struct InteropTests {
    @Test("jwcrypto decrypts our response with the device's key and sees section 11's header")
    func jwcryptoDecryptsOurResponse() throws {
        let token = try ResponseFixture.response()
        let pem = try Verification.device.encryptionKey.pemRepresentation()
        let result = try python("psso_interop.py", ["decrypt", token, pem])
        try #require(result.status == 0, "jwcrypto refused our JWE: \(result.error)")
        let output = try JSONValue(parsing: result.output)
        let header = try #require(output["header"])
        #expect(header["alg"] == "ECDH-ES" && header["enc"] == "A256GCM" && header["typ"] == "platformsso-login-response+jwt")
        #expect(header["kid"] == .string(PlatformSSOKeyID(of: Verification.device.encryptionKey.publicKey).canonical))
        let plaintext = try JSONValue(parsing: output["plaintext"]!.stringValue!)
        #expect(plaintext["refresh_token"] == "next-token" && plaintext["token_type"] == "Bearer")

        // And the id_token inside verifies with Python's cryptography against our JWKS.
        let jwks = JWKS.document([("gw-1", ResponseFixture.signer.key.verificationKey)]).serializedString()
        let verified = try python("verify_jwt.py", [jwks, plaintext["id_token"]!.stringValue!])
        try #require(verified.status == 0, "id_token refused: \(verified.error)")
        #expect(try JSONValue(parsing: verified.output)["claims"]?["sub"] == "user-42")
    }

    @Test("keys with short coordinates interoperate too")
    func shortCoordinates() throws {
        var device: MacDevice?
        for _ in 0..<2_000 {
            let key = try P256.PrivateKey()
            if key.publicKey.x[0] == 0 || key.publicKey.y[0] == 0 {
                device = MacDevice(signingKey: try P256.PrivateKey(), encryptionKey: key)
                break
            }
        }
        let short = try #require(device)
        let token = try ResponseFixture.builder.response(
            for: try ResponseFixture.verified(short), device: short.keys, user: ResponseFixture.user, refreshToken: "t",
            refreshTokenExpiresIn: 1, now: MacRefreshRequest.now)
        let result = try python("psso_interop.py", ["decrypt", token, try short.encryptionKey.pemRepresentation()])
        #expect(result.status == 0, "\(result.error)")
    }

    @Test("jwcrypto refuses our response under another key (the check can fail)")
    func jwcryptoRefusesWrongKey() throws {
        let token = try ResponseFixture.response()
        let result = try python("psso_interop.py", ["decrypt", token, try Verification.otherDevice.encryptionKey.pemRepresentation()])
        #expect(result.status != 0)
    }

    @Test("a refresh request jwcrypto signs the way a Mac does passes our verifier; altered, it does not")
    func ourVerifierAcceptsJwcryptoRequest() throws {
        let settings: JSONValue = [
            "client_id": .string(MacRefreshRequest.clientID), "aud": .string(MacRefreshRequest.audience),
            "now": .integer(MacRefreshRequest.now), "nonce": "5C2B3A4E-0D1F-4E8A-9B7C-112233445566",
            "server_nonce": "server-nonce-from-python", "refresh_token": "rt-from-python",
        ]
        let result = try python("psso_interop.py", [
            "refresh-request", try Verification.device.signingKey.pemRepresentation(),
            Verification.device.encryptionKey.publicKey.pemRepresentation, settings.serializedString(),
        ])
        try #require(result.status == 0, "jwcrypto could not sign: \(result.error)")
        let jws = try #require(try JSONValue(parsing: result.output)["jws"]?.stringValue)

        let parsed = try JWSCompact(parsing: jws)
        #expect(parsed.header.keyID == Verification.device.kid, "padded standard base64, as a Mac sends it")
        #expect(String(decoding: parsed.payload.prefix(12), as: UTF8.self) == "{\n  \"iat\" : ")

        let verifier = RefreshRequestVerifier(settings: .test)
        let unverified = try verifier.parse(jws)
        #expect(unverified.serverNonce == "server-nonce-from-python" && unverified.refreshToken == "rt-from-python")
        let verified = try verifier.verify(unverified, device: Verification.device.keys, now: MacRefreshRequest.now + 30)
        #expect(verified.nonce == "5C2B3A4E-0D1F-4E8A-9B7C-112233445566")
        #expect(verified.issuedAt == Double(MacRefreshRequest.now))

        // A response to it decrypts on the Mac's side as well.
        let response = try ResponseFixture.builder.response(
            for: verified, device: Verification.device.keys, user: ResponseFixture.user, refreshToken: "next",
            refreshTokenExpiresIn: 10, now: MacRefreshRequest.now)
        let decrypted = try python("psso_interop.py", ["decrypt", response, try Verification.device.encryptionKey.pemRepresentation()])
        #expect(decrypted.status == 0, "\(decrypted.error)")

        let parts = jws.split(separator: ".").map(String.init)
        let payload = String(decoding: Base64.decodeURL(parts[1])!, as: UTF8.self)
            .replacingOccurrences(of: "rt-from-python", with: "rt-from-pythoN")
        let tampered = parts[0] + "." + Base64.encodeURL(Array(payload.utf8)) + "." + parts[2]
        #expect(throws: OAuthError.signatureInvalid) {
            try verifier.verify(try verifier.parse(tampered), device: Verification.device.keys, now: MacRefreshRequest.now)
        }
    }
}
