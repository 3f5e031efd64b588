import AGCrypto
import AGDevice
import AGFormats
import AGPlatformSSO
import AGPolicy
import Foundation
import Testing

@testable import AGGateway

/// The Platform SSO handlers' decisions, in process: each store answer's status and OAuth code,
/// and that a refused step never reaches the next one.
@Suite("Platform SSO routes (in process)")
struct PlatformSSORouteTests {
    static let sso = """
        platform_sso:
          path_prefix: /psso
          client_id: harness-client
          audience: [https://gw.test/psso/token]
          refresh_token_ttl: 2d
          refresh_token_idle: 1d
          reuse_grace: 20s
          nonce_ttl: 90s

        """
    static let form = [("Content-Type", "application/x-www-form-urlencoded")]

    struct Setup {
        let harness: RouterHarness
        let mac: SimulatedMac
        let token = PlatformSSORefreshToken.newFamily()
        let body: [UInt8]
        let request: MacRefreshRequest

        init(signedBy key: P256.PrivateKey? = nil) throws {
            harness = try RouterHarness(tenantExtra: PlatformSSORouteTests.sso)
            mac = try SimulatedMac(teamID: RouterHarness.tenantTeamID, bundleID: "com.example.app", subject: "u-1")
            request = MacRefreshRequest(mac: mac, clientID: "harness-client", audience: "https://gw.test/psso/token",
                                        serverNonce: "n-1", refreshToken: token.text, now: harness.time.nowMilliseconds / 1000)
            body = Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(try request.signed(with: key ?? mac.signingKey))".utf8)
        }

        var allowed: RateLimitOutcome {
            let check = harness.tenant.bucket(.attest, tier: harness.snapshot.gateway.tiers["test"]!)
            return .allowed(BucketDecision(check: check, decision: TokenBucket.Decision(
                allowed: true, limit: check.limitPerMinute, remaining: 7, resetAt: 1_800_000_001, retryAfter: 0)))
        }

        var ready: PlatformSSOPrepared {
            .ready(mac.keys, user: try! PlatformSSOUser(subject: "u-1", claims: ["name": "Ada"]))
        }

        func send() -> HarnessResponse { harness.send("POST", "/psso/token", headers: PlatformSSORouteTests.form, body: body) }
    }

    @Test("a malformed request reaches no store and takes no rate-limit token")
    func malformed() throws {
        let setup = try Setup()
        let response = setup.harness.send("POST", "/psso/token", headers: Self.form, body: Array("grant_type=x".utf8))
        #expect(response.status == 400 && response.json["error"] as? String == "unsupported_grant_type")
        #expect(setup.harness.platformSSO.prepared.isEmpty && response.header("X-RateLimit-Limit") == nil)
    }

    @Test("every refusal of the prepare step, and its store failures", arguments: [
        (Result<PlatformSSORefusal, StoreFailure>.success(.deviceUnknown), 401, "invalid_grant", "device unknown"),
        (.success(.deviceDisabled), 401, "invalid_grant", "device disabled"),
        (.failure(StoreFailure(description: "down")), 503, "temporarily_unavailable", "the service is temporarily unavailable"),
    ])
    func prepareRefusals(reply: Result<PlatformSSORefusal, StoreFailure>, status: Int, error: String, description: String) throws {
        let setup = try Setup()
        setup.harness.platformSSO.prepareReply = reply.map { (setup.allowed, .refused($0)) }
        let response = setup.send()
        #expect(response.status == status && response.json["error"] as? String == error)
        #expect(response.json["error_description"] as? String == description)
        #expect(response.header("WWW-Authenticate") == (status == 401 ? "PlatformSSO" : nil))
        #expect(setup.harness.platformSSO.committed.isEmpty)
        #expect(setup.harness.platformSSO.prepared.first?.keyID == setup.mac.keyID)
    }

    @Test("a limited bucket is 429 with Retry-After, whatever the script found")
    func limited() throws {
        let setup = try Setup()
        let check = setup.harness.tenant.bucket(.attest, tier: setup.harness.snapshot.gateway.tiers["test"]!)
        setup.harness.platformSSO.prepareReply = .success((.limited(BucketDecision(check: check, decision: TokenBucket.Decision(
            allowed: false, limit: 5, remaining: 0, resetAt: 1_800_000_030, retryAfter: 12))), .refused(.rateLimited)))
        let response = setup.send()
        #expect(response.status == 429 && response.json["error"] as? String == "rate_limited")
        #expect(response.header("Retry-After") == "12" && response.header("X-RateLimit-Remaining") == "0")
        #expect(setup.harness.platformSSO.committed.isEmpty)
    }

    @Test("a signature by another key is 401 before the commit")
    func signature() throws {
        let setup = try Setup(signedBy: try P256.PrivateKey())
        setup.harness.platformSSO.prepareReply = .success((setup.allowed, setup.ready))
        let response = setup.send()
        #expect(response.status == 401 && response.json["error_description"] as? String == "the request signature does not verify")
        #expect(response.header("WWW-Authenticate") == "PlatformSSO")
        #expect(setup.harness.platformSSO.committed.isEmpty)
    }

    @Test("every refusal of the commit step", arguments: [
        (PlatformSSORefusal.nonceUnknown, 400, "invalid_grant", "nonce unknown"),
        (.nonceExpired, 400, "invalid_grant", "nonce expired"), (.nonceUsed, 400, "invalid_grant", "nonce already used"),
        (.deviceUnknown, 401, "invalid_grant", "device unknown"), (.deviceDisabled, 401, "invalid_grant", "device disabled"),
        (.refreshTokenUnknown, 401, "invalid_grant", "refresh token unknown"),
        (.refreshTokenExpired, 401, "invalid_grant", "refresh token expired"),
        (.refreshTokenRevoked, 401, "invalid_grant", "refresh token revoked"),
        (.refreshTokenReused, 401, "invalid_grant", "refresh token reused; every token of its family is revoked"),
    ])
    func commitRefusals(refusal: PlatformSSORefusal, status: Int, error: String, description: String) throws {
        let setup = try Setup()
        setup.harness.platformSSO.prepareReply = .success((setup.allowed, setup.ready))
        setup.harness.platformSSO.commitReply = .success(.refused(refusal))
        let response = setup.send()
        #expect(response.status == status && response.json["error"] as? String == error)
        #expect(response.json["error_description"] as? String == description)
        #expect(response.header("WWW-Authenticate") == (status == 401 ? "PlatformSSO" : nil))
        #expect(response.header("X-RateLimit-Remaining") == "7")
        let outcome = refusal.answer.outcome.rawValue
        #expect(setup.harness.metrics.counters["attestgate_psso_refreshes_total{tenant=\"\(RouterHarness.appID)\",outcome=\"\(outcome)\"}"] == 1)
    }

    @Test("the commit gets the nonce, the token's family, a successor in it, and the tenant's lifetimes; 200 decrypts")
    func committed() throws {
        let setup = try Setup()
        setup.harness.platformSSO.prepareReply = .success((setup.allowed, setup.ready))
        setup.harness.platformSSO.commitReply = .success(.rotated(expiresIn: 3_600))
        let response = setup.send()
        #expect(response.status == 200)
        let commit = try #require(setup.harness.platformSSO.committed.first)
        #expect(commit.serverNonce == "n-1" && commit.nonceTTL == .seconds(90) && commit.reuseGrace == .seconds(20))
        #expect(commit.familyTTL == .seconds(2 * 86_400) && commit.idle == .seconds(86_400))
        #expect(commit.presented == setup.token && commit.successor.familyID == setup.token.familyID)
        let jwks = try JSONValue(parsing: setup.harness.snapshot.tokenKeys.jwksBody)
        let login = try MacLoginResponse(jwe: String(decoding: response.body, as: UTF8.self), mac: setup.mac, request: setup.request,
                                         jwks: jwks, expected: .init(issuer: "https://attestgate.test", clientID: "harness-client"),
                                         now: setup.harness.time.nowMilliseconds / 1000)
        #expect(login.refreshToken == commit.successor.text && login.refreshTokenExpiresIn == 3_600)
        #expect(login.idTokenClaims["name"] == "Ada")
    }

    @Test("a commit store failure fails closed")
    func commitFailure() throws {
        let setup = try Setup()
        setup.harness.platformSSO.prepareReply = .success((setup.allowed, setup.ready))
        setup.harness.platformSSO.commitReply = .failure(StoreFailure(description: "down"))
        let response = setup.send()
        #expect(response.status == 503 && response.json["error"] as? String == "temporarily_unavailable")
    }

    @Test("nonce: the tenant's challenge and the IP bucket first, fail closed, then the store")
    func nonce() throws {
        let setup = try Setup()
        let body = Array("grant_type=srv_challenge".utf8)
        let ok = setup.harness.send("POST", "/psso/nonce", headers: Self.form, body: body)
        #expect(ok.status == 200 && ok.json["Nonce"] as? String == "harness-nonce")
        #expect(setup.harness.limiter.checked.last?.map(\.name) == ["challenge", "ip-psso-nonce"])
        setup.harness.platformSSO.nonceReply = .failure(StoreFailure(description: "down"))
        let failed = setup.harness.send("POST", "/psso/nonce", headers: Self.form, body: body)
        #expect(failed.status == 503 && failed.json["error"] as? String == "temporarily_unavailable")
        setup.harness.limiter.unavailable = true
        let issued = setup.harness.platformSSO.noncesIssued
        let refused = setup.harness.send("POST", "/psso/nonce", headers: Self.form, body: body)
        #expect(refused.status == 503 && refused.json["error"] as? String == "temporarily_unavailable")
        #expect(setup.harness.platformSSO.noncesIssued == issued, "no nonce without the bucket")
    }
}
