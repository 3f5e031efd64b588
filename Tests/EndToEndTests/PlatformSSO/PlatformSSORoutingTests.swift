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
