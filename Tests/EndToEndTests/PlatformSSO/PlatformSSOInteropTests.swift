import AGCrypto
import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// The real gateway against an independent JOSE implementation (Python jwcrypto, driven by
/// `Tests/Fixtures/psso_interop.py`; `scripts/test` installs it): a refresh request jwcrypto
/// signs the way a Mac does is served, and jwcrypto decrypts the gateway's answer.
@Suite("Platform SSO interop with jwcrypto through the gateway")
struct PlatformSSOInteropTests {
    func python(_ script: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let (status, output) = try runProgram("/usr/bin/env", ["python3", TestGateway.fixturePath(script)] + arguments)
        return (status, String(decoding: output, as: UTF8.self))
    }

    @Test func aJwcryptoRequestIsServedAndJwcryptoDecryptsTheAnswer() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let nonce = "7C1E2F3A-4B5C-4D6E-8F90-A1B2C3D4E5F6"
        let settings: JSONValue = [
            "client_id": .string(PlatformSSOGateway.clientID), "aud": .string(PlatformSSOGateway.audience),
            "now": .integer(sso.nowSeconds), "nonce": .string(nonce), "server_nonce": .string(try sso.nonce()),
            "refresh_token": .string(token),
        ]
        let signed = try python("psso_interop.py", ["refresh-request", try mac.signingKey.pemRepresentation(),
                                                    mac.encryptionKey.publicKey.pemRepresentation, settings.serializedString()])
        try #require(signed.status == 0, "jwcrypto could not sign")
        let jws = try #require(try JSONValue(parsing: Array(signed.output.utf8))["jws"]?.stringValue)
        let response = try sso.post(PlatformSSOGateway.form(jws))
        try #require(response.status == 200, "\(response.text)")

        let decrypted = try python("psso_interop.py", ["decrypt", response.text, try mac.encryptionKey.pemRepresentation()])
        try #require(decrypted.status == 0, "jwcrypto could not decrypt the gateway's answer")
        let output = try JSONValue(parsing: Array(decrypted.output.utf8))
        #expect(output["header"]?["typ"] == "platformsso-login-response+jwt")
        #expect(output["header"]?["alg"] == "ECDH-ES" && output["header"]?["enc"] == "A256GCM")
        let plaintext = try JSONValue(parsing: Array(try #require(output["plaintext"]?.stringValue).utf8))
        let successor = try #require(plaintext["refresh_token"]?.stringValue)
        #expect(try sso.currentDigest(ofFamilyOf: token) == PlatformSSOGateway.digest(successor))

        // The id_token inside verifies with Python's cryptography against the gateway's JWKS.
        let jwks = try sso.gateway.send("GET", "/.well-known/jwks.json").text
        let idToken = try #require(plaintext["id_token"]?.stringValue)
        let claims = try #require(try independentlyVerifiedJWT(jwks: jwks, token: idToken))
        #expect((claims["claims"] as? [String: Any])?["nonce"] as? String == nonce)
        #expect((claims["claims"] as? [String: Any])?["sub"] as? String == "user-42")

        // Under another key jwcrypto refuses it: the check above could fail.
        let wrong = try python("psso_interop.py", ["decrypt", response.text, try P256.PrivateKey().pemRepresentation()])
        #expect(wrong.status != 0)
    }
}
