import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// How Platform SSO paths are found (by path alone, before the proxy) and what every answer
/// carries: `X-Request-ID`, `Cache-Control: no-store`, the echoed `client-request-id`, an
/// access-log line.
@Suite("Platform SSO routing, end to end")
struct PlatformSSORoutingTests {
    @Test func pathsMethodsAndHeaders() throws {
        let sso = try PlatformSSOGateway(tenantExtra: "upstream: http://127.0.0.1:9\nroutes:\n  - prefix: /api/\n")
        defer { sso.stop() }
        let get = try sso.gateway.send("GET", "/psso/token", headers: [("client-request-id", "ABC-123"), ("X-Request-ID", "req-1")])
        #expect(get.status == 405 && get.oauthError == "invalid_request")
        #expect(get.header("Allow") == "POST")
        #expect(get.header("client-request-id") == "ABC-123")
        #expect(get.header("X-Request-ID") == "req-1" && get.json["requestId"] as? String == "req-1")
        #expect(get.header("Cache-Control") == "no-store")

        let odd = try sso.post(Array("grant_type=srv_challenge".utf8), path: "/psso/nonce", headers: [("client-request-id", "a b")])
        #expect(odd.status == 200)
        #expect(odd.header("client-request-id") == nil, "an id that is not sane is not repeated")
        // The form is split as the WHATWG URL Standard (5.1) splits it: empty pieces skipped, a
        // bare name has an empty value (these were 400 before stop 34).
        let loose = try sso.post(Array("&grant_type=srv_challenge&&flag&".utf8), path: "/psso/nonce")
        #expect(loose.status == 200 && (loose.json["Nonce"] as? String)?.count == 43)

        // Only the three endpoints belong to Platform SSO; anything else goes to the proxy.
        for path in ["/psso", "/psso/", "/psso/other", "/psso/token/", "/PSSO/token", "/other/psso/token"] {
            let response = try sso.gateway.send("POST", path, headers: [("X-Team-ID", sso.teamID), ("X-Bundle-ID", "com.example.app")])
            #expect(response.status == 404, "\(path)")
            #expect(response.code == "not_found", "\(path)")
        }
        // /psso/refresh is the same handler, logged under its own route.
        let refresh = try sso.post(Array("grant_type=x".utf8), path: "/psso/refresh")
        #expect(refresh.status == 400 && refresh.oauthError == "unsupported_grant_type")
        #expect(try eventually {
            let log = sso.gateway.accessLogText()
            return log.contains(#""path":"/psso/refresh","tenant":"\#(sso.appID)","route":"psso_refresh","status":400,"code":"unsupported_grant_type""#)
                && log.contains(#""route":"psso_token","status":405,"code":"invalid_request""#)
                && log.contains(#""route":"psso_nonce","status":200"#)
        })
    }
}

/// The `platform_sso` keys the other suites leave at their defaults, each with its effect.
@Suite("Platform SSO settings, end to end")
struct PlatformSSOSettingsTests {
    @Test func nonceClaimNameIssuerClockSkewAndIdTokenLifetime() throws {
        let sso = try PlatformSSOGateway(settings: ["nonce_claim_name: srv_nonce", "issuer: https://idp.example.com",
                                                    "clock_skew: 0s", "id_token_ttl: 1h"])
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        // The server nonce travels in the configured claim; request_nonce means nothing here.
        let nonce = try sso.nonce()
        let wrongClaim = sso.request(mac, token: token, nonce: nonce)
        let refused = try sso.post(PlatformSSOGateway.form(try wrongClaim.signed(by: mac)))
        #expect(refused.status == 400 && refused.oauthError == "invalid_request")
        #expect(refused.json["error_description"] as? String == "claim srv_nonce is missing")
        // No skew: a request issued one second ahead is refused.
        var ahead = MacRefreshRequest(mac: mac, clientID: PlatformSSOGateway.clientID, audience: PlatformSSOGateway.audience,
                                      serverNonce: nonce, refreshToken: token, nonceClaimName: "srv_nonce", now: sso.nowSeconds + 1)
        let early = try sso.post(PlatformSSOGateway.form(try ahead.signed(by: mac)))
        #expect(early.status == 400 && early.json["error_description"] as? String == "claim iat is in the future")
        ahead = MacRefreshRequest(mac: mac, clientID: PlatformSSOGateway.clientID, audience: PlatformSSOGateway.audience,
                                  serverNonce: nonce, refreshToken: token, nonceClaimName: "srv_nonce", now: sso.nowSeconds)
        let response = try sso.post(PlatformSSOGateway.form(try ahead.signed(by: mac)))
        try #require(response.status == 200, "\(response.text)")
        let jwks = try JSONValue(parsing: try sso.gateway.send("GET", "/.well-known/jwks.json").body)
        let login = try MacLoginResponse(jwe: response.text, mac: mac, request: ahead, jwks: jwks,
                                         expected: .init(issuer: "https://idp.example.com", clientID: PlatformSSOGateway.clientID),
                                         now: sso.nowSeconds)
        #expect(login.idTokenClaims["iss"] == "https://idp.example.com")
        #expect(login.expiresIn == 3_600 && login.idTokenClaims["exp"]?.integerValue == sso.nowSeconds + 3_600)
    }
}
