import AGCrypto
import AGFormats
import AGPolicy
import AGConfig
import Foundation
import Testing

@testable import AGGateway

/// The proxy's and the admin API's decisions, in process.
@Suite("proxy and admin routes (in process)")
struct ProxyAndAdminRouteTests {
    static let proxied = """
        upstream: http://127.0.0.1:9
        routes:
          - { prefix: /api/, auth: required }
          - { prefix: /public/, auth: none }
        """

    func bearer(_ token: String) -> [(String, String)] {
        RouterHarness.tenantHeaders + [("Authorization", "Bearer \(token)")]
    }

    @Test func aValidTokenIsForwardedWithItsClaimHeaders() throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let token = try harness.token()
        let response = harness.send("GET", "/api/x", headers: bearer(token))
        #expect(response.status == 200)
        let forwarded = try #require(harness.forwarder.forwarded.first)
        #expect(forwarded.injected.first { $0.name == "X-Attest-Key-Id" }?.value == "a2V5LWlk")
        #expect(forwarded.injected.contains { $0.name == "X-Attest-Claims" })
        #expect(harness.limiter.checked.map { $0.map(\.name) } == [["api"]])
        #expect(harness.limiter.deviceChecks == ["ag:{\(RouterHarness.appID)}:dev:a2V5LWlk"])
        // The second use comes from the token cache, and its device, found in good standing at
        // the tenant's current device epoch, is not read again.
        _ = harness.send("GET", "/api/x", headers: bearer(token))
        #expect(harness.limiter.deviceChecks.count == 1)
        #expect(harness.metrics.counters["attestgate_token_cache_hits_total"] == 1)
        // Once the epoch moves (a revocation somewhere in the tenant), it is read again, and a
        // revoked device is refused.
        harness.limiter.epoch += 1
        harness.limiter.revoked = ["a2V5LWlk"]
        let refused = harness.send("GET", "/api/x", headers: bearer(token))
        #expect(refused.status == 403)
        #expect(refused.code == "forbidden")
        #expect(harness.limiter.deviceChecks.count == 2)
        #expect(harness.forwarder.forwarded.count == 2)
    }

    @Test func anonymousRoutesForwardNoClaims() throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let response = harness.send("GET", "/public/x", headers: RouterHarness.tenantHeaders)
        #expect(response.status == 200)
        #expect(harness.forwarder.forwarded.first?.injected.isEmpty == true)
    }

    @Test func tokensExpireOnTheControlledClock() throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let token = try harness.token(ttl: 60)
        #expect(harness.send("GET", "/api/x", headers: bearer(token)).status == 200)
        harness.time.advance(.seconds(60 + 31))
        let expired = harness.send("GET", "/api/x", headers: bearer(token))
        #expect(expired.status == 401)
        #expect(expired.code == "token_expired")
        #expect(harness.forwarder.forwarded.count == 1)
    }

    @Test("token refusals never reach the upstream", arguments: [
        ("", 401, "token_missing"), ("Bearer garbage", 401, "token_invalid"), ("Basic dXNlcjpwdw==", 401, "token_missing"),
    ])
    func tokenRefusals(authorization: String, status: Int, code: String) throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let headers = RouterHarness.tenantHeaders + (authorization.isEmpty ? [] : [("Authorization", authorization)])
        let response = harness.send("GET", "/api/x", headers: headers)
        #expect(response.status == status)
        #expect(response.code == code)
        if code == "token_missing" { #expect(response.header("WWW-Authenticate") == "Bearer") }
        #expect(harness.forwarder.forwarded.isEmpty)
        #expect(harness.limiter.checked.isEmpty)
    }

    @Test func anotherTenantsTokenIsAMismatch() throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let token = try harness.token(claims: ["team_id": "OTHER12345"])
        let response = harness.send("GET", "/api/x", headers: bearer(token))
        #expect(response.status == 403)
        #expect(response.code == "token_tenant_mismatch")
    }

    @Test(arguments: ["revoked", "missing"])
    func aDeviceRevokedOrGoneInTheStoreIsRefused(_ state: String) throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        if state == "revoked" { harness.limiter.revoked = ["a2V5LWlk"] } else { harness.limiter.missing = ["a2V5LWlk"] }
        let token = try harness.token()
        for _ in 0..<2 {
            let response = harness.send("GET", "/api/x", headers: bearer(token))
            #expect(response.status == 403)
            #expect(response.code == "forbidden")
        }
        #expect(harness.limiter.checked.isEmpty, "a refused device takes no api token")
        #expect(harness.forwarder.forwarded.isEmpty)
    }

    @Test func anUncheckableTokenIsRefusedUnlessThePolicyAllowsIt() throws {
        let denying = try RouterHarness(tenantExtra: Self.proxied)
        denying.limiter.unavailable = true
        let refused = denying.send("GET", "/api/x", headers: bearer(try denying.token()))
        #expect(refused.status == 503)
        #expect(refused.code == "store_unavailable")
        #expect(denying.forwarder.forwarded.isEmpty)
        #expect(denying.send("GET", "/public/x", headers: RouterHarness.tenantHeaders).status == 200,
                "anonymous routes have no device to check")

        let allowing = try RouterHarness(tenantExtra: Self.proxied, gatewayYAML: "proxy:\n  unverified_token_policy: allow\n")
        allowing.limiter.unavailable = true
        #expect(allowing.send("GET", "/api/x", headers: bearer(try allowing.token())).status == 200)
        // Still refused when this worker heard of the revocation before Redis went away.
        allowing.revocations.known = ["a2V5LWlk"]
        let heard = allowing.send("GET", "/api/x", headers: bearer(try allowing.token()))
        #expect(heard.status == 403)
        #expect(heard.code == "forbidden")
        #expect(allowing.forwarder.forwarded.count == 1)
    }

    @Test func unknownRoutesAre404() throws {
        let harness = try RouterHarness(tenantExtra: Self.proxied)
        let response = harness.send("GET", "/elsewhere", headers: RouterHarness.tenantHeaders)
        #expect(response.status == 404)
        #expect(response.code == "not_found")
    }

    @Test func adminNeedsItsToken() throws {
        let harness = try RouterHarness()
        let refused = harness.admin("GET", "/admin/v1/tiers", token: "wrong")
        #expect(refused.status == 401)
        #expect(refused.code == "unauthorized")
        #expect(refused.header("WWW-Authenticate") == "Bearer")
        #expect(harness.admin("GET", "/admin/v1/tiers").status == 200)
    }

    @Test func importKeyChecksTheKeyAgainstTheKeyID() throws {
        let harness = try RouterHarness()
        let key = try P256.PrivateKey().publicKey
        let keyID = Base64.encodeURL(SHA256.hash(key.x963Representation))
        let path = "/admin/v1/tenants/\(RouterHarness.appID)/keys/\(keyID)"
        let body = #"{"publicKey":"\#(Base64.encode(key.x963Representation))","counter":3}"#
        let wrongPath = "/admin/v1/tenants/\(RouterHarness.appID)/keys/\(Base64.encodeURL([UInt8](repeating: 1, count: 32)))"
        let mismatch = harness.admin("PUT", wrongPath, json: body)
        #expect(mismatch.status == 400)
        #expect(mismatch.code == "key_id_invalid")
        let badCounter = harness.admin("PUT", path, json: #"{"publicKey":"\#(Base64.encode(key.x963Representation))","counter":-1}"#)
        #expect(badCounter.code == "bad_request")
        #expect(harness.devices.imported.isEmpty)
        let imported = harness.admin("PUT", path, json: body)
        #expect(imported.status == 200)
        #expect(harness.devices.imported.map(\.counter) == [3])
        harness.devices.failAdmin = true
        let down = harness.admin("PUT", path, json: body)
        #expect(down.status == 503)
        #expect(down.code == "store_unavailable")
    }

    /// Admin bodies have their own limit (1 MiB), not `server.max_body_bytes`: a gateway that
    /// lowered that for its public endpoints could not import a key or store a subscription
    /// (an independent sweep of the README's claims, stop 36); over 1 MiB the answer says so.
    @Test func adminBodiesAreNotBoundByThePublicBodyLimit() throws {
        let harness = try RouterHarness(gatewayYAML: "server:\n  listen: \"127.0.0.1:0\"\n  max_body_bytes: 64\n")
        let key = try P256.PrivateKey().publicKey
        let keyID = Base64.encodeURL(SHA256.hash(key.x963Representation))
        let path = "/admin/v1/tenants/\(RouterHarness.appID)/keys/\(keyID)"
        let body = #"{"publicKey":"\#(Base64.encode(key.x963Representation))","counter":3}"#
        #expect(body.utf8.count > 64)
        let imported = harness.admin("PUT", path, json: body)
        #expect(imported.status == 200, "\(imported.code ?? "")")
        let huge = harness.admin("PUT", path, json: #"{"publicKey":""# + String(repeating: "A", count: 1 << 20) + #""}"#)
        #expect(huge.status == 400)
        #expect(huge.code == "bad_request")
        #expect(huge.json["error"] as? String == "request body exceeds 1048576 bytes")
    }

    @Test func revokeAndRead() throws {
        let harness = try RouterHarness()
        let keyID = Base64.encodeURL([UInt8](repeating: 2, count: 32))
        let path = "/admin/v1/tenants/\(RouterHarness.appID)/keys/\(keyID)"
        let missing = harness.admin("POST", path + "/revoke")
        #expect(missing.status == 404)
        #expect(missing.code == "not_found")
        harness.devices.records[Base64.encode([UInt8](repeating: 2, count: 32))] = DeviceRecord(
            publicKey: "pk", counter: 4, revoked: false, environment: "production", subjectID: nil,
            createdMilliseconds: 1_800_000_000_000, lastSeenMilliseconds: nil)
        #expect(harness.admin("POST", path + "/revoke").status == 200)
        let read = harness.admin("GET", path)
        #expect(read.json["counter"] as? Int == 4)
        #expect(read.json["createdAt"] as? String == "2027-01-15T08:00:00Z")
    }

    @Test func usageGraceIsJudgedOnTheControlledClock() throws {
        let harness = try RouterHarness(tier: "small", gatewayYAML: """
            quotas:
              grace: 1h
            tiers:
              small: { attest: 100, challenge: 100, api: 100, mad_limit: 12 }
            """)
        harness.devices.usageReply = DeviceUsage(month: "202701", activeDevices: 12, graceStartedMilliseconds: 1_800_000_000_000)
        let inGrace = harness.admin("GET", "/admin/v1/tenants/\(RouterHarness.appID)/usage")
        #expect(inGrace.json["inGrace"] as? Bool == true)
        #expect(inGrace.json["month"] as? String == "2027-01")
        #expect(inGrace.json["graceEndsAt"] as? String == "2027-01-15T09:00:00Z")
        harness.time.advance(.seconds(3601))
        let over = harness.admin("GET", "/admin/v1/tenants/\(RouterHarness.appID)/usage")
        #expect(over.json["inGrace"] as? Bool == false)
        #expect(over.json["exceeded"] as? Bool == true)
        // Under the limit (raised since the grace period started), the old period is over and
        // nothing is exceeded.
        harness.devices.usageReply = DeviceUsage(month: "202701", activeDevices: 11, graceStartedMilliseconds: 1_800_000_000_000)
        let under = harness.admin("GET", "/admin/v1/tenants/\(RouterHarness.appID)/usage")
        #expect(under.json["inGrace"] as? Bool == false && under.json["exceeded"] as? Bool == false)
        #expect(under.json["graceStartedAt"] == nil)
    }

    @Test func reloadAnswersWithTheOutcome() throws {
        let harness = try RouterHarness()
        let ok = harness.admin("POST", "/admin/v1/reload")
        #expect(ok.status == 200)
        #expect(ok.json["generation"] as? Int == 2)
        harness.reloader.reply = .failure(ConfigError(problems: [ConfigProblem(file: "t.yaml", line: 3, keyPath: "tier", message: "bad")]))
        let rejected = harness.admin("POST", "/admin/v1/reload")
        #expect(rejected.status == 400)
        #expect(rejected.code == "config_invalid")
        #expect((rejected.json["hint"] as? String)?.contains("t.yaml:3") == true)
    }

    @Test func readinessFollowsTheStore() throws {
        let harness = try RouterHarness()
        #expect(harness.send("GET", "/readyz").status == 200)
        harness.health.healthy = false
        let down = harness.send("GET", "/readyz")
        #expect(down.status == 503)
        #expect(down.code == "store_unavailable")
        #expect(harness.send("GET", "/healthz").status == 200)
    }
}
