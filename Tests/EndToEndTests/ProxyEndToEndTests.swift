import AGCrypto
import AGFormats
import AGHTTP
import AGTestSupport
import Foundation
import Testing

/// The reverse proxy end to end: real gateway, real Redis, real upstream, real sockets.
@Suite("reverse proxy")
struct ProxyEndToEndTests {
    @Test func verifiedClaimsArriveAsHeadersAndSpoofedOnesNever() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let (token, device) = try fixture.deviceToken()
        let response = try fixture.gateway.send("GET", "/api/items?limit=5&q=a%20b",
                                                headers: fixture.tenantHeaders + spoofedHeaders + [("Authorization", "Bearer \(token)")])
        #expect(response.status == 200, "\(response.text)")
        #expect(response.text == #"{"ok":true}"#)
        let record = try #require(fixture.upstream.records.last)
        #expect(record.method == "GET")
        #expect(record.target == "/base/api/items?limit=5&q=a%20b")
        #expect(!record.carriesForgedValue, "\(record.headers)")
        #expect(record.headerValues("X-Attest-Key-Id") == [device.keyID])
        #expect(record.headerValues("X-Attest-Team-Id") == [fixture.teamID])
        #expect(record.headerValues("X-Attest-Bundle-Id") == [fixture.bundleID])
        #expect(record.headerValues("X-Attest-Subject-Id") == [])
        #expect(record.headerValues("X-Plan") == ["gold"])
        let payloadSegment = token.split(separator: ".")[1]
        #expect(record.headerValues("X-Attest-Claims") == [String(payloadSegment)])
        let payload = try #require(Base64.decodeURL(record.header("X-Attest-Claims") ?? ""))
        let claims = try #require(try JSONValue(parsing: payload).objectValue)
        #expect(claims["sub"]?.stringValue == device.keyID)
        #expect(claims["custom_claims"]?["plan"]?.stringValue == "gold")
        #expect(record.header("Authorization") == nil, "the token is not forwarded by default")
        #expect(record.headerValues("X-Forwarded-For") == ["127.0.0.1"])
        #expect(record.headerValues("X-Forwarded-Proto") == ["http"])
        #expect(record.headerValues("X-Forwarded-Host") == ["127.0.0.1:\(fixture.gateway.port)"], "the Host the client sent")
        #expect(record.headerValues("X-Request-ID") == [try #require(response.header("X-Request-ID"))])
        #expect(record.headerValues("Host") == ["127.0.0.1:\(fixture.upstream.port)"])

        // Without tenant headers the token names the tenant.
        let byToken = try fixture.get("/api/by-token", token: token, headers: spoofedHeaders)
        #expect(byToken.status == 200, "\(byToken.text)")
        let second = try #require(fixture.upstream.records.last)
        #expect(second.target == "/base/api/by-token")
        #expect(!second.carriesForgedValue)
        #expect(second.headerValues("X-Attest-Key-Id") == [device.keyID])
        #expect(eventually { fixture.gateway.accessLogText().contains("/api/by-token") }, "the access log has been written")
        #expect(!fixture.gateway.accessLogText().contains(token.prefix(40)))
        #expect(!fixture.gateway.logText().contains(token.prefix(40)))
    }

    @Test func anonymousRoutesForwardWithoutAnyClaimHeader() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        let token = try fixture.sign(fixture.claims())
        for headers in [fixture.tenantHeaders + spoofedHeaders, fixture.tenantHeaders + spoofedHeaders + [("Authorization", "Bearer \(token)")]] {
            let response = try fixture.gateway.send("POST", "/public/feedback", headers: headers, body: Array("hello".utf8))
            #expect(response.status == 200, "\(response.text)")
            let record = try #require(fixture.upstream.records.last)
            #expect(record.method == "POST")
            #expect(record.body == Array("hello".utf8))
            #expect(!record.headerNames.contains { $0.hasPrefix("x-attest") || $0.hasPrefix("x_attest") || $0 == "x-plan" || $0 == "x_plan" },
                    "\(record.headers)")
            #expect(record.header("Authorization") == nil)
        }
    }

    @Test func refusedRequestsNeverReachTheUpstream() throws {
        let other = TestGateway.randomTeamID()
        let fixture = try ProxyFixture(otherTenants: ["other.yaml": ProxyFixture.tenantYAML(teamID: other, upstreamPort: 9)])
        defer { fixture.stop() }
        var otherClaims = fixture.claims()
        otherClaims["team_id"] = .string(other)
        otherClaims["aud"] = .string("\(other).com.example.app")
        let cases: [(String, [(String, String)], Int, String)] = [
            ("no token", fixture.tenantHeaders, 401, "token_missing"),
            ("garbage", fixture.tenantHeaders + [("Authorization", "Bearer garbage")], 401, "token_invalid"),
            ("other tenant", fixture.tenantHeaders + [("Authorization", "Bearer \(try fixture.sign(otherClaims))")], 403, "token_tenant_mismatch"),
            ("no route", fixture.tenantHeaders, 404, "not_found"),
            ("unknown tenant", [("X-Team-ID", "NOPE000000"), ("X-Bundle-ID", "com.example.app")], 404, "not_found"),
            ("dot segments", fixture.tenantHeaders, 400, "bad_request"),
        ]
        let targets = ["no route": "/elsewhere", "dot segments": "/public/../api/x"]
        for (name, headers, status, code) in cases {
            let response = try fixture.gateway.send("GET", targets[name] ?? "/api/x", headers: headers + spoofedHeaders)
            #expect(response.status == status, "\(name): \(response.text)")
            #expect(response.code == code, "\(name)")
            #expect(response.header("X-Request-ID") != nil)
        }
        #expect(fixture.upstream.records.isEmpty)
        let missing = try fixture.get("/api/x")
        #expect(missing.header("WWW-Authenticate") == "Bearer")
        #expect(try fixture.get("/nothing", headers: []).code == "not_found", "no tenant headers and no token")
    }

    /// A token that passed the whole claims check for its tenant is checked only for its times
    /// on that tenant's later requests (`VerifiedToken.claimsCheckedFor`); sent for another
    /// tenant it is checked in full again, on every worker, and refused; and it still expires.
    @Test func aCheckedTokenStaysBoundToItsTenantAndItsTimes() throws {
        let time = ManualTime()
        let other = TestGateway.randomTeamID()
        let fixture = try ProxyFixture(otherTenants: ["other.yaml": ProxyFixture.tenantYAML(teamID: other, upstreamPort: 9)],
                                       time: time)
        defer { fixture.stop() }
        let token = try fixture.sign(fixture.claims(now: time.nowMicroseconds / 1_000_000))
        let otherHeaders = [("X-Team-ID", other), ("X-Bundle-ID", fixture.bundleID)]
        for round in 0..<3 {
            // Several requests per round, so both workers' caches hold the token.
            for _ in 0..<4 { #expect(try fixture.get("/api/x", token: token).status == 200, "round \(round)") }
            for _ in 0..<4 {
                let response = try fixture.get("/api/x", token: token, headers: otherHeaders)
                #expect(response.status == 403, "round \(round): \(response.text)")
                #expect(response.code == "token_tenant_mismatch")
            }
        }
        time.advance(.seconds(3600 + 31))
        let expired = try fixture.get("/api/x", token: token)
        #expect(expired.status == 401)
        #expect(expired.code == "token_expired")
        #expect(fixture.upstream.records.count == 12, "only the tenant's own requests reached the upstream")
    }

    @Test func everyTokenFailureHasItsStatusAndCode() throws {
        let fixture = try ProxyFixture(keys: [("test-es256", "ES256", true), ("test-rs256", "RS256", false)])
        defer { fixture.stop() }
        let now = Int64(Date().timeIntervalSince1970)
        func with(_ changes: [String: JSONValue]) -> [String: JSONValue] {
            var claims = fixture.claims(now: now)
            for (key, value) in changes { claims[key] = value }
            return claims
        }
        let good = try fixture.sign(with([:]))
        var flipped = Array(good.utf8)
        flipped[flipped.count - 5] = flipped[flipped.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let parts = good.split(separator: ".")
        let algNone = Base64.encodeURL(Array(#"{"alg":"none","kid":"test-es256","typ":"JWT"}"#.utf8)) + "." + parts[1] + ".AA"
        // The same signature with s replaced by n − s: it verifies too, but the gateway signs
        // low-S only, so it is refused — one token, one spelling (stop 34, independent growth
        // sweep: the twin was accepted, a second cache entry per token; docs/security.md had
        // listed it as refused since issue 9).
        let twin = parts[0] + "." + parts[1] + "." + Base64.encodeURL(P256.negatingS(rawSignature: Base64.decodeURL(String(parts[2]))!))
        let cases: [(String, String, Int, String)] = [
            ("high-S twin of a valid ES256 token", twin, 401, "token_invalid"),
            ("valid ES256", good, 200, ""),
            ("valid RS256", try fixture.sign(with([:]), kid: "test-rs256"), 200, ""),
            ("garbage", "not-a-token", 401, "token_invalid"),
            ("bad signature", String(decoding: flipped, as: UTF8.self), 401, "token_invalid"),
            ("alg none", algNone, 401, "token_invalid"),
            ("unknown kid", try fixture.sign(with([:]), headerKID: "nobody"), 401, "token_invalid"),
            ("RS256 under the ES256 kid", try fixture.sign(with([:]), kid: "test-rs256", headerKID: "test-es256"), 401, "token_invalid"),
            ("expired within leeway", try fixture.sign(with(["exp": .integer(now - 10)])), 200, ""),
            ("expired beyond leeway", try fixture.sign(with(["exp": .integer(now - 120)])), 401, "token_expired"),
            ("nbf in the future", try fixture.sign(with(["nbf": .integer(now + 600)])), 401, "token_invalid"),
            ("wrong aud", try fixture.sign(with(["aud": "someone-else"])), 401, "token_invalid"),
            ("wrong iss", try fixture.sign(with(["iss": "https://evil.test"])), 401, "token_invalid"),
            ("no exp", try fixture.sign(with([:]).filter { $0.key != "exp" }), 401, "token_invalid"),
            ("other bundle", try fixture.sign(with(["bundle_id": "com.example.other"])), 403, "token_tenant_mismatch"),
        ]
        for (name, token, status, code) in cases {
            let response = try fixture.get("/api/check", token: token)
            #expect(response.status == status, "\(name): \(response.text)")
            if !code.isEmpty { #expect(response.code == code, "\(name)") }
        }
        #expect(fixture.upstream.records.count == 3)
    }

    @Test func aCustomTokenHeaderAndForwardedAuthorization() throws {
        let fixture = try ProxyFixture(tenantExtra: """
            token:
              header: X-App-Token
            """)
        defer { fixture.stop() }
        let token = try fixture.sign(fixture.claims())
        for value in [token, "Bearer \(token)"] {
            let response = try fixture.gateway.send("GET", "/api/x", headers: fixture.tenantHeaders + [("X-App-Token", value), ("Authorization", "Basic dTpw")])
            #expect(response.status == 200, "\(response.text)")
            let record = try #require(fixture.upstream.records.last)
            #expect(record.header("X-App-Token") == nil)
            #expect(record.header("Authorization") == "Basic dTpw")
        }
        #expect(try fixture.get("/api/x", token: token).code == "token_missing", "Authorization is not this tenant's token header")
        // Without tenant headers the token in the tenant's own header names it (stop 32: only
        // Authorization was read, so the tenant could not be reached without its headers).
        for value in [token, "Bearer \(token)"] {
            let response = try fixture.gateway.send("GET", "/api/by-token", headers: [("X-App-Token", value)])
            #expect(response.status == 200, "\(response.text)")
            #expect(fixture.upstream.records.last?.target.hasSuffix("/api/by-token") == true)
        }
        #expect(try fixture.get("/api/x", token: token, headers: []).code == "token_missing",
                "the token in Authorization names the tenant, which reads its own header")

        let forwarding = try ProxyFixture(tenantExtra: """
              forward_authorization: true
            """)
        defer { forwarding.stop() }
        let forwardedToken = try forwarding.sign(forwarding.claims())
        #expect(try forwarding.get("/api/x", token: forwardedToken).status == 200)
        #expect(forwarding.upstream.records.last?.header("Authorization") == "Bearer \(forwardedToken)")
    }

    @Test func upstreamAnswersPassThroughUnchanged() throws {
        let fixture = try ProxyFixture()
        defer { fixture.stop() }
        fixture.upstream.reply { _ in
            UpstreamReply(status: 418, headers: [("Content-Type", "text/teapot"), ("X-Custom", "short and stout"), ("Set-Cookie", "a=1"),
                                                 ("Set-Cookie", "b=2"), ("Keep-Alive", "timeout=5"), ("Connection", "keep-alive, X-Hop"),
                                                 ("X-Hop", "secret")],
                          body: Array("I'm a teapot".utf8))
        }
        let response = try fixture.get("/public/tea")
        #expect(response.status == 418)
        #expect(response.text == "I'm a teapot")
        #expect(response.header("Content-Type") == "text/teapot")
        #expect(response.header("X-Custom") == "short and stout")
        #expect(response.headerValues("Set-Cookie") == ["a=1", "b=2"])
        #expect(response.header("Keep-Alive") == nil)
        #expect(response.header("X-Hop") == nil)
        #expect(response.header("X-Request-ID") != nil)
    }

    @Test func upstreamFailures() throws {
        let fixture = try ProxyFixture(gatewayYAML: """
            server:
              listen: "127.0.0.1:0"
              workers: 1
              max_proxy_body_bytes: 1KiB
              timeouts:
                upstream_response: 300ms
            """)
        defer { fixture.stop() }
        fixture.upstream.reply { _ in UpstreamReply(delay: 1.5) }
        let slow = try fixture.get("/public/slow")
        #expect(slow.status == 504)
        #expect(slow.code == "upstream_timeout")

        fixture.upstream.reply { _ in UpstreamReply(body: Array(repeating: UInt8(ascii: "x"), count: 4000), ending: .closeMidBody) }
        let client = try HTTPTestClient(port: fixture.gateway.port)
        #expect(throws: HTTPClientError.self, "the client's connection is cut") {
            try client.request("GET", "/public/cut", headers: fixture.tenantHeaders)
        }

        fixture.upstream.reply { _ in UpstreamReply(ending: .closeWithoutAnswer) }
        let reset = try fixture.get("/public/reset")
        #expect(reset.status == 502)
        #expect(reset.code == "upstream_unavailable")

        #expect(try eventually { try fixture.metric("attestgate_upstream_errors_total") >= 3 })
        let upstreamErrors = try fixture.metric("attestgate_upstream_errors_total")
        let before = fixture.upstream.records.count
        let large = try fixture.gateway.send("POST", "/public/upload", headers: fixture.tenantHeaders, body: Array(repeating: 1, count: 2048))
        #expect(large.status == 413)
        #expect(large.code == "payload_too_large")
        #expect(fixture.upstream.records.count == before)
        // The client's mistake is no upstream error (an alert on these would fire for it).
        #expect(try fixture.metric("attestgate_upstream_errors_total") == upstreamErrors)
        #expect(try !fixture.gateway.admin("GET", "/metrics").text.contains("body_too_large"))
        #expect(eventually { fixture.gateway.accessLogText().contains("\"upstreamMs\"") }, "access log lines are written in batches")
    }

    @Test func aDeadUpstreamIsBadGateway() throws {
        let dead = try RecordingUpstream()
        dead.stop()
        let fixture = try ProxyFixture(upstream: dead)
        defer { fixture.stop() }
        let response = try fixture.get("/public/x")
        #expect(response.status == 502)
        #expect(response.code == "upstream_unavailable")
    }

    @Test func connectionsToTheUpstreamAreReused() throws {
        let fixture = try ProxyFixture(workers: 1)
        defer { fixture.stop() }
        let token = try fixture.sign(fixture.claims())
        let client = try HTTPTestClient(port: fixture.gateway.port)
        for index in 0..<30 {
            let response = try client.request("GET", "/api/item/\(index)", headers: fixture.tenantHeaders + [("Authorization", "Bearer \(token)")])
            #expect(response.status == 200)
        }
        for index in 0..<10 { #expect(try fixture.get("/public/\(index)").status == 200) }
        #expect(fixture.upstream.records.count == 40)
        #expect(fixture.upstream.connectionCount <= 2, "\(fixture.upstream.connectionCount) upstream connections for 40 requests")
    }

    @Test func aRepeatedTokenIsNotVerifiedAgain() throws {
        let fixture = try ProxyFixture(workers: 1)
        defer { fixture.stop() }
        let token = try fixture.sign(fixture.claims())
        for _ in 0..<5 { #expect(try fixture.get("/api/x", token: token).status == 200) }
        #expect(try fixture.metric("attestgate_token_cache_misses_total") == 1)
        #expect(try fixture.metric("attestgate_token_cache_hits_total") == 4)
        // A reload starts a new cache: the key set may have changed.
        #expect(try fixture.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try fixture.get("/api/x", token: token).status == 200)
        #expect(try fixture.metric("attestgate_token_cache_misses_total") == 2)
    }

    @Test func aRevokedDeviceIsRefusedOnEveryInstanceWithinOneSecond() throws {
        let first = try ProxyFixture()
        defer { first.stop() }
        let second = try ProxyFixture(teamID: first.teamID, upstream: first.upstream)
        defer { second.gateway.stop() }
        // Both instances verify with the same key, as a real deployment would.
        try FileManager.default.removeItem(atPath: second.gateway.directory + "/keys/test-es256.pem")
        try FileManager.default.copyItem(atPath: first.gateway.directory + "/keys/test-es256.pem",
                                         toPath: second.gateway.directory + "/keys/test-es256.pem")
        #expect(try second.gateway.admin("POST", "/admin/v1/reload").status == 200)

        let (token, device) = try first.deviceToken()
        for instance in [first, second] {
            for _ in 0..<3 { #expect(try instance.get("/api/x", token: token).status == 200, "cached on every worker") }
        }
        let revoke = try first.gateway.admin("POST", "/admin/v1/tenants/\(first.appID)/keys/\(device.keyIDForPath)/revoke")
        #expect(revoke.status == 200)
        for instance in [first, second] {
            let refused = eventually(1) {
                (0..<4).allSatisfy { _ in (try? instance.get("/api/x", token: token))?.code == "forbidden" }
            }
            #expect(refused, "instance on port \(instance.gateway.port) still serves the revoked device")
        }
        let response = try second.get("/api/x", token: token)
        #expect(response.status == 403)
        #expect(response.code == "forbidden")
        // Every refusal is counted, the ones a worker decided from the events stream too (those
        // were not, until stop 32: an independent sweep saw the counter stay at 0).
        func forbidden() -> Int { second.gateway.accessLogText().split(separator: "\n").filter { $0.contains(#""code":"forbidden""#) }.count }
        #expect(try eventually {
            try forbidden() >= 5 && second.metric("attestgate_proxy_refused_devices_total{reason=\"revoked\"}") == forbidden()
        }, "\(forbidden()) refusals")

        // A third instance that never saw the message learns it from Redis on first sight.
        let third = try ProxyFixture(teamID: first.teamID, upstream: first.upstream)
        defer { third.gateway.stop() }
        try FileManager.default.removeItem(atPath: third.gateway.directory + "/keys/test-es256.pem")
        try FileManager.default.copyItem(atPath: first.gateway.directory + "/keys/test-es256.pem",
                                         toPath: third.gateway.directory + "/keys/test-es256.pem")
        #expect(try third.gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try third.get("/api/x", token: token).code == "forbidden")
    }
}
