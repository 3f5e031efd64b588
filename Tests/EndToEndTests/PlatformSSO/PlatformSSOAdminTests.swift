import AGCrypto
import AGDevice
import AGFormats
import AGPlatformSSO
import AGTestSupport
import Foundation
import Testing

/// The admin API's Platform SSO calls with every error, and what each call does to refreshes.
@Suite("Platform SSO admin API, end to end")
struct PlatformSSOAdminTests {
    func body(signingKey: JSONValue, encryptionKey: JSONValue, user: JSONValue? = ["sub": "user-42"]) -> String {
        var members: [String: JSONValue] = ["signingKey": signingKey, "encryptionKey": encryptionKey]
        if let user { members["user"] = user }
        return JSONValue.object(members).serializedString()
    }

    @Test func registrationAcceptsEveryKeyFormAndRefusesWithACode() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let mac = try sso.newMac()
        let path = "\(sso.devicesPath)/\(mac.keyID.urlSafe)"
        let sk = mac.signingKey.publicKey, ek = mac.encryptionKey.publicKey
        let rawPointPEM = "-----BEGIN PUBLIC KEY-----\n\(Base64.encode(sk.x963Representation))\n-----END PUBLIC KEY-----\n"
        let forms: [(String, JSONValue, JSONValue)] = [
            ("SPKI PEM + JWK", .string(sk.pemRepresentation), ek.jwk),
            ("raw point PEM + base64 X9.63", .string(rawPointPEM), .string(Base64.encode(ek.x963Representation))),
            ("JWK + base64url X9.63", sk.jwk, .string(Base64.encodeURL(ek.x963Representation))),
            ("JWK text + SPKI PEM", .string(sk.jwk.serializedString()), .string(ek.pemRepresentation)),
        ]
        for (index, (name, signing, encryption)) in forms.enumerated() {
            let response = try sso.gateway.admin("PUT", path, json: body(signingKey: signing, encryptionKey: encryption))
            #expect(response.status == (index == 0 ? 201 : 200), "\(name): \(response.text)")
            #expect(response.json["kid"] as? String == mac.keyID.urlSafe, "\(name)")
        }
        let other = try P256.PrivateKey().publicKey
        let cases: [(String, String, String, Int, String)] = [
            ("kid of another key", "\(sso.devicesPath)/\(PlatformSSOKeyID(of: other).urlSafe)",
             body(signingKey: .string(sk.pemRepresentation), encryptionKey: ek.jwk), 400, "key_id_mismatch"),
            ("kid not 32 bytes", "\(sso.devicesPath)/AAAA", body(signingKey: sk.jwk, encryptionKey: ek.jwk), 400, "key_id_invalid"),
            ("kid with a bad escape", "\(sso.devicesPath)/%41\(mac.keyID.urlSafe)", body(signingKey: sk.jwk, encryptionKey: ek.jwk),
             400, "key_id_invalid"),
            ("signing key garbage", path, body(signingKey: "AAAA", encryptionKey: ek.jwk), 400, "key_invalid"),
            ("encryption key a number", path, body(signingKey: sk.jwk, encryptionKey: 5), 400, "key_invalid"),
            ("private JWK", path, body(signingKey: sk.jwk, encryptionKey: ["kty": "EC", "crv": "P-256", "d": "AA", "x": "AA", "y": "AA"]),
             400, "key_invalid"),
            ("signing key missing", path, #"{"encryptionKey":"x","user":{"sub":"u"}}"#, 400, "bad_request"),
            ("user missing", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: nil), 400, "bad_request"),
            ("unknown member", path, #"{"signingKey":"x","encryptionKey":"x","user":{"sub":"u"},"extra":1}"#, 400, "bad_request"),
            ("not JSON", path, "signingKey=x", 400, "bad_request"),
            ("user.sub missing", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: ["claims": [:]]), 400, "user_invalid"),
            ("user.sub empty", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: ["sub": ""]), 400, "user_invalid"),
            ("user.claims not an object", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: ["sub": "u", "claims": [1]]),
             400, "user_invalid"),
            ("reserved claim", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: ["sub": "u", "claims": ["nonce": "x"]]),
             400, "user_invalid"),
            ("user not an object", path, body(signingKey: sk.jwk, encryptionKey: ek.jwk, user: "u"), 400, "user_invalid"),
        ]
        for (name, target, json, status, code) in cases {
            let response = try sso.gateway.admin("PUT", target, json: json)
            #expect(response.status == status, "\(name): \(response.text)")
            #expect(response.code == code, "\(name): \(response.text)")
        }
        // None of the refused calls changed the record.
        let record = try sso.gateway.admin("GET", path)
        #expect(record.status == 200)
        #expect((record.json["user"] as? [String: Any])?["sub"] as? String == "user-42")
        #expect(record.json["disabled"] as? Bool == false)
        #expect((record.json["signingKey"] as? [String: Any])?["x"] as? String == Base64.encodeURL(sk.x))
        #expect(record.json["encryptionKeyId"] as? String == PlatformSSOKeyID(of: ek).canonical)
        #expect(record.json["createdAt"] is String && record.json["updatedAt"] is String)
        // Standard base64 in the path, escaped, names the same device.
        let escaped = mac.keyID.canonical.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F")
            .replacingOccurrences(of: "=", with: "%3D")
        #expect(try sso.gateway.admin("GET", "\(sso.devicesPath)/\(escaped)").status == 200)
    }

    @Test func pathsMethodsTenantsAndUnknownDevices() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let plainTeam = TestGateway.randomTeamID()
        try sso.gateway.writeTenant("plain.yaml", TestGateway.tenantYAML(teamID: plainTeam))
        #expect(try sso.gateway.admin("POST", "/admin/v1/reload").status == 200)
        let kid = try sso.newMac().keyID.urlSafe
        let cases: [(String, String, Int, String)] = [
            ("GET", "\(sso.devicesPath)/\(kid)", 404, "not_found"),
            ("DELETE", "\(sso.devicesPath)/\(kid)", 404, "not_found"),
            ("POST", "\(sso.devicesPath)/\(kid)/revoke", 404, "not_found"),
            ("POST", "\(sso.devicesPath)/\(kid)/refresh-tokens", 404, "not_found"),
            ("POST", "\(sso.devicesPath)/\(kid)", 405, "method_not_allowed"),
            ("GET", "\(sso.devicesPath)/\(kid)/revoke", 405, "method_not_allowed"),
            ("GET", "\(sso.devicesPath)/\(kid)/other", 404, "not_found"),
            ("GET", "\(sso.devicesPath)", 404, "not_found"),
            ("GET", "/admin/v1/tenants/\(plainTeam).com.example.app/psso/devices/\(kid)", 404, "not_found"),
            ("GET", "/admin/v1/tenants/NOPE.x.y/psso/devices/\(kid)", 404, "not_found"),
        ]
        for (method, target, status, code) in cases {
            let response = try sso.gateway.admin(method, target)
            #expect(response.status == status, "\(method) \(target): \(response.text)")
            #expect(response.code == code, "\(method) \(target)")
        }
        let unauthorized = try HTTPTestClient.send(port: sso.gateway.adminPort, "GET", "\(sso.devicesPath)/\(kid)")
        #expect(unauthorized.status == 401 && unauthorized.code == "unauthorized")
    }

    @Test func revokeDeleteAndReRegisterDecideWhatRefreshes() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let path = "\(sso.devicesPath)/\(mac.keyID.urlSafe)"
        let second = try sso.mint(mac)
        let current = try sso.rotate(mac, token: token)

        let revoked = try sso.gateway.admin("POST", path + "/revoke")
        #expect(revoked.status == 200 && revoked.json["disabled"] as? Bool == true)
        for presented in [current, second] {
            let (response, _) = try sso.refresh(mac, token: presented)
            #expect(response.status == 401 && response.oauthError == "invalid_grant")
            #expect(response.json["error_description"] as? String == "device disabled")
        }
        let mintRevoked = try sso.gateway.admin("POST", path + "/refresh-tokens")
        #expect(mintRevoked.status == 409 && mintRevoked.code == "device_disabled")

        // Registered again (after a new login): new families work, the old ones stay dead.
        #expect(try sso.register(mac).status == 200)
        #expect(try sso.gateway.admin("GET", path).json["disabled"] as? Bool == false)
        let (old, _) = try sso.refresh(mac, token: current)
        #expect(old.status == 401 && old.json["error_description"] as? String == "refresh token revoked")
        let fresh = try sso.rotate(mac, token: try sso.mint(mac))

        // Handed to another user: the previous user's families end.
        #expect(try sso.register(SimulatedMac(teamID: mac.teamID, bundleID: mac.bundleID, subject: "user-99",
                                                  signingKey: mac.signingKey, encryptionKey: mac.encryptionKey)).status == 200)
        let (handedOver, _) = try sso.refresh(mac, token: fresh)
        #expect(handedOver.status == 401 && handedOver.json["error_description"] as? String == "refresh token revoked")
        _ = try sso.rotate(mac, token: try sso.mint(mac))

        let deleted = try sso.gateway.admin("DELETE", path)
        #expect(deleted.status == 200 && deleted.json["deleted"] as? Bool == true)
        let (gone, _) = try sso.refresh(mac, token: fresh)
        #expect(gone.status == 401 && gone.json["error_description"] as? String == "device unknown")
        #expect(gone.header("WWW-Authenticate") == "PlatformSSO", "RFC 9110 section 15.5.2: a 401 carries a challenge")
        #expect(try sso.gateway.admin("GET", path).status == 404)
    }

    @Test func mintedTokensStartNewFamilies() throws {
        let sso = try PlatformSSOGateway(settings: ["refresh_token_ttl: 2d", "refresh_token_idle: 1d"])
        defer { sso.stop() }
        let mac = try sso.newMac()
        #expect(try sso.register(mac).status == 201)
        let minted = try sso.gateway.admin("POST", "\(sso.devicesPath)/\(mac.keyID.urlSafe)/refresh-tokens")
        #expect(minted.status == 201)
        #expect(minted.header("Cache-Control") == "no-store")
        #expect(minted.json["expires_in"] as? Int == 86_400)
        let first = try #require(minted.json["refresh_token"] as? String)
        let second = try sso.mint(mac)
        #expect(PlatformSSORefreshToken(presented: first)?.familyID != PlatformSSORefreshToken(presented: second)?.familyID)
        _ = try sso.rotate(mac, token: first)
        _ = try sso.rotate(mac, token: second)
        #expect(!sso.gateway.logText().contains(first) && !sso.gateway.accessLogText().contains(first))
    }
}
