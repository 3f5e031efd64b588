import AGCrypto
import AGDevice
import AGFormats
import AGPlatformSSO
import AGPolicy
import AGTestSupport
import Foundation
import Testing

/// Refresh-token families through the real gateway, on a controlled clock: rotation, reuse
/// revoking the family, the `reuse_grace` window, absolute and idle lifetimes, nonce lifetime.
@Suite("Platform SSO refresh-token families, end to end")
struct PlatformSSOFamilyTests {
    static let lifetimes = ["refresh_token_ttl: 1h", "refresh_token_idle: 30m", "reuse_grace: 30s", "nonce_ttl: 2m",
                            "id_token_ttl: 2h"]

    func expectRefused(_ sso: PlatformSSOGateway, _ mac: SimulatedMac, _ token: String, status: Int, error: String,
                       description: String, _ comment: Comment) throws {
        let (response, _) = try sso.refresh(mac, token: token)
        #expect(response.status == status, comment)
        #expect(response.oauthError == error, comment)
        #expect(response.json["error_description"] as? String == description, comment)
    }

    @Test func everyRefreshRotatesAndTheResponseIsWhatAMacChecks() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let (response, request) = try sso.refresh(mac, token: first, headers: [("client-request-id", "3F2A-77")])
        #expect(response.header("Content-Type") == "application/platformsso-login-response+jwt")
        #expect(response.header("Cache-Control") == "no-store")
        #expect(response.header("client-request-id") == "3F2A-77")
        let login = try sso.login(response, mac, request)
        #expect(login.refreshToken != first && login.refreshToken.count == 64)
        #expect(login.expiresIn == 7_200)
        #expect(login.refreshTokenExpiresIn == 1_800, "min(family ttl left, idle)")
        let claims = login.idTokenClaims
        #expect(claims["sub"] == "user-42" && claims["name"] == "Ada" && claims["aud"] == .string(PlatformSSOGateway.clientID))
        #expect(claims["exp"]?.integerValue == sso.nowSeconds + 7_200 && claims["nbf"]?.integerValue == sso.nowSeconds)
        #expect(login.idTokenHeader["kid"] == "test-es256" && login.idTokenHeader["typ"] == "JWT")
        #expect(login.header["kid"] == .string(PlatformSSOKeyID(of: mac.encryptionKey.publicKey).canonical))
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(login.refreshToken))
        #expect(PlatformSSORefreshToken(presented: login.refreshToken)?.familyID == PlatformSSORefreshToken(presented: first)?.familyID)

        // Only digests are stored: no key holds a token in clear.
        let keys = try sso.redis("--scan", "--pattern", "ag:{\(sso.appID)}:psso:*")
        #expect(!keys.contains(first) && !keys.contains(login.refreshToken))
        let family = try sso.redis("HGETALL", "ag:{\(sso.appID)}:psso:fam:\(PlatformSSORefreshToken(presented: first)!.familyID)")
        #expect(!family.contains(first) && !family.contains(login.refreshToken))

        // macOS 13: Accept: application/json gets the same body with typ JWT.
        let (json, jsonRequest) = try sso.refresh(mac, token: login.refreshToken, headers: [("Accept", "application/json")])
        #expect(json.header("Content-Type") == "application/platformsso-login-response+jwt")
        _ = try sso.login(json, mac, jsonRequest, type: "JWT")
        #expect(!sso.gateway.logText().contains(first) && !sso.gateway.accessLogText().contains(first))
        #expect(!sso.gateway.logText().contains(request.value("request_nonce")!.stringValue!))
    }

    @Test func reuseOfARotatedTokenRevokesTheWholeFamily() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let second = try sso.rotate(mac, token: first)
        let third = try sso.rotate(mac, token: second)
        try expectRefused(sso, mac, first, status: 401, error: "invalid_grant",
                          description: "refresh token reused; every token of its family is revoked", "a token two rotations old")
        #expect(try sso.familyRevoked(first))
        try expectRefused(sso, mac, third, status: 401, error: "invalid_grant", description: "refresh token revoked",
                          "the current token of the revoked family")
        // The IdP's next login starts a new family that works.
        _ = try sso.rotate(mac, token: try sso.mint(mac))
    }

    @Test func theGraceWindowReplacesAnUnusedSuccessor() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let lost = try sso.rotate(mac, token: first)
        sso.time.advance(.seconds(15))
        // The answer carrying `lost` never reached the Mac: it sends `first` again, within the window.
        let lostAgain = try sso.rotate(mac, token: first)
        #expect(lostAgain != lost)
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(lostAgain))
        // That answer was lost too: still within the window of the rotation and with the
        // successor unused, the token is honoured again (DESIGN 11 sets no count).
        sso.time.advance(.seconds(14))
        let replacement = try sso.rotate(mac, token: first)
        #expect(replacement != lostAgain)
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(replacement))
        // The successors it replaced stay valid until one of the three is used (the answers of
        // parallel requests arrive in either order: the Mac may hold any); the first used ends
        // the others, which are then old tokens of the family: presenting one is reuse.
        sso.time.advance(.seconds(60))
        let next = try sso.rotate(mac, token: lost)
        try expectRefused(sso, mac, replacement, status: 401, error: "invalid_grant",
                          description: "refresh token reused; every token of its family is revoked", "a sibling of the used one")
        try expectRefused(sso, mac, next, status: 401, error: "invalid_grant", description: "refresh token revoked",
                          "family revoked")
    }

    /// Two requests with one token within the window, their answers arriving in the other
    /// order than their commits: the Mac keeps the earlier commit's successor, which must work
    /// (a sweep of concurrent refreshes, stop 35: the family was revoked in 15 to 18 of 40
    /// such pairs, the Mac logged out).
    @Test func theMacMayKeepEitherOfTwoGraceAnswers() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let committedFirst = try sso.rotate(mac, token: first)
        let committedSecond = try sso.rotate(mac, token: first)
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(committedSecond))
        let next = try sso.rotate(mac, token: committedFirst)
        #expect(try !sso.familyRevoked(first))
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(next))
        _ = try sso.rotate(mac, token: next)
        // The answer the Mac dropped is an old token now.
        try expectRefused(sso, mac, committedSecond, status: 401, error: "invalid_grant",
                          description: "refresh token reused; every token of its family is revoked", "the dropped answer")
    }

    @Test func theGraceWindowEndsAfterReuseGrace() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let second = try sso.rotate(mac, token: first)
        sso.time.advance(.seconds(30))
        try expectRefused(sso, mac, first, status: 401, error: "invalid_grant",
                          description: "refresh token reused; every token of its family is revoked", "30 s after the rotation")
        try expectRefused(sso, mac, second, status: 401, error: "invalid_grant", description: "refresh token revoked", "second")
    }

    @Test func theGraceWindowNeedsAnUnusedSuccessor() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, first) = try sso.enrolledMac()
        let second = try sso.rotate(mac, token: first)
        _ = try sso.rotate(mac, token: second)
        try expectRefused(sso, mac, first, status: 401, error: "invalid_grant",
                          description: "refresh token reused; every token of its family is revoked", "successor used")
    }

    @Test func familiesExpireWhenIdleAndAtTheirAbsoluteLifetime() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        // Idle: 30 minutes without a refresh.
        let (mac, idle) = try sso.enrolledMac()
        sso.time.advance(.seconds(29 * 60 + 59))
        let fresh = try sso.rotate(mac, token: idle)
        sso.time.advance(.seconds(30 * 60))
        try expectRefused(sso, mac, fresh, status: 401, error: "invalid_grant", description: "refresh token expired", "idle")

        // Absolute: used every 25 minutes, the family still ends an hour after the login.
        var token = try sso.mint(mac)
        var remaining: [Int64] = []
        for _ in 0..<2 {
            sso.time.advance(.seconds(25 * 60))
            let (response, request) = try sso.refresh(mac, token: token)
            let login = try sso.login(response, mac, request)
            remaining.append(login.refreshTokenExpiresIn)
            token = login.refreshToken
        }
        #expect(remaining == [1_800, 600], "min(idle, what is left of the hour)")
        sso.time.advance(.seconds(10 * 60))
        let before = try sso.currentDigest(ofFamilyOf: token)
        try expectRefused(sso, mac, token, status: 401, error: "invalid_grant", description: "refresh token expired", "absolute")
        #expect(try sso.currentDigest(ofFamilyOf: token) == before && !sso.familyRevoked(token), "an expired family is left as it is")
    }

    @Test func serverNoncesExpireAndServeOnce() throws {
        let sso = try PlatformSSOGateway(settings: Self.lifetimes)
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let stale = try sso.nonce()
        sso.time.advance(.seconds(120) + .milliseconds(1))
        let expired = try sso.post(PlatformSSOGateway.form(try sso.request(mac, token: token, nonce: stale).signed(by: mac)))
        #expect(expired.status == 400 && expired.oauthError == "invalid_grant")
        #expect(expired.json["error_description"] as? String == "nonce expired")

        let nonce = try sso.nonce()
        let request = sso.request(mac, token: token, nonce: nonce)
        let next = try sso.login(try sso.post(PlatformSSOGateway.form(try request.signed(by: mac))), mac, request).refreshToken
        let again = try sso.post(PlatformSSOGateway.form(try sso.request(mac, token: next, nonce: nonce).signed(by: mac)))
        #expect(again.status == 400 && again.oauthError == "invalid_grant")
        #expect(again.json["error_description"] as? String == "nonce already used")
        #expect(try sso.currentDigest(ofFamilyOf: next) == PlatformSSOGateway.digest(next), "a refused nonce rotates nothing")
        let unknown = try sso.post(PlatformSSOGateway.form(try sso.request(mac, token: next, nonce: "nope").signed(by: mac)))
        #expect(unknown.status == 400 && unknown.json["error_description"] as? String == "nonce unknown")
    }
}

/// A refresh whose commit reaches Redis only after the gateway gave up on it (503) — a Redis
/// stall, a slow network — must change nothing: the Mac presents the same token again later,
/// which would otherwise read as reuse and end the family. An independent sweep saw `CLIENT
/// PAUSE 400` log Macs out this way; here a relay holds the commit script back instead.
@Suite("Platform SSO: a commit that arrives too late")
struct PlatformSSOLateCommitTests {
    @Test func aCommitThatReachesRedisAfterTheGatewayGaveUpChangesNothing() throws {
        let shared = try #require(URLComponents(string: TestGateway.sharedRedisURL))
        let relay = try DelayingRelay(targetPort: shared.port ?? 6379)
        defer { relay.stop() }
        // No grace: a rotation that happened would make the retry below a reuse at once.
        let settings = PlatformSSOFamilyTests.lifetimes.filter { !$0.hasPrefix("reuse_grace") } + ["reuse_grace: 0s"]
        let sso = try PlatformSSOGateway(settings: settings, redisURL: "redis://127.0.0.1:\(relay.port)\(shared.path)")
        defer { sso.stop() }
        let (mac, enrolled) = try sso.enrolledMac()
        // One rotation first, so that Redis knows the commit script: a held `EVALSHA` of a script
        // it had never seen would only earn `NOSCRIPT`, which runs nothing.
        let first = try sso.rotate(mac, token: enrolled)

        relay.hold(next: PlatformSSOScripts.commitRefresh.sha1, for: .milliseconds(800))
        let nonce = try sso.nonce()
        let late = try sso.post(PlatformSSOGateway.form(try sso.request(mac, token: first, nonce: nonce).signed(by: mac)))
        #expect(late.status == 503 && late.oauthError == "temporarily_unavailable", "\(late.text)")
        #expect(relay.held == 1)
        // Once the held script is in Redis's socket, a command sent after it is run after it.
        #expect(try eventually(5) { relay.passed == 1 })
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(first), "the family did not rotate")
        #expect(try sso.nonceState(nonce).hasPrefix("used:") == false, "nor was the nonce spent")

        // The Mac's later retry with the token it holds is an ordinary refresh.
        let next = try sso.rotate(mac, token: first)
        #expect(try sso.currentDigest(ofFamilyOf: first) == PlatformSSOGateway.digest(next))
    }
}

/// `redis.wait_replicas` holds for Platform SSO as for App Attest: a rotation no replica
/// confirmed is not answered as done — a failover to that replica would lose it, and the Mac,
/// holding a token the new primary never saw, would have to log in again (an independent sweep
/// saw exactly that: the setting was ignored here). The rotation the primary made is taken
/// back, so the Mac's retry is an ordinary refresh whatever the reuse grace.
@Suite("Platform SSO: redis.wait_replicas")
struct PlatformSSOReplicationTests {
    @Test func aRotationNoReplicaConfirmedIsRefusedAndTakenBack() throws {
        let url = TestGateway.sharedRedisURL
        // The shared test Redis has no replica: no write is ever confirmed.
        let unreplicated = "redis:\n  url: \(url)\n  timeout: 2s\n  wait_replicas: 1\n  wait_timeout: 50ms\n"
        let settings = PlatformSSOFamilyTests.lifetimes.filter { !$0.hasPrefix("reuse_grace") } + ["reuse_grace: 0s"]
        let sso = try PlatformSSOGateway(settings: settings, gatewayYAML: unreplicated)
        defer { sso.stop() }
        let mac = try sso.newMac()
        #expect(try sso.register(mac).status == 201)
        // The admin's first token is a write like a rotation: refused unconfirmed as well.
        let minted = try sso.gateway.admin("POST", "\(sso.devicesPath)/\(mac.keyID.urlSafe)/refresh-tokens")
        #expect(minted.status == 503, "\(minted.text)")

        // A family minted straight in Redis, as an unreplicated admin call would have left it.
        let token = PlatformSSORefreshToken.newFamily(using: SecureRandomBuffer())
        let familyKey = "ag:{\(sso.appID)}:psso:fam:\(token.familyID)"
        let epoch = try sso.redis("HGET", "ag:{\(sso.appID)}:psso:dev:\(mac.keyID.urlSafe)", "epoch")
        let now = String(sso.time.nowMicroseconds / 1000)
        _ = try sso.redis("HSET", familyKey, "kid", mac.keyID.urlSafe, "epoch", epoch, "created", now, "last", now,
                          "cur", token.digest, "prev", "", "rot", now, "rev", "0")
        _ = try sso.redis("SET", "ag:{\(sso.appID)}:psso:rt:\(token.digest)", token.familyID)

        let (refused, _) = try sso.refresh(mac, token: token.text)
        #expect(refused.status == 503 && refused.oauthError == "temporarily_unavailable", "\(refused.text)")
        // The undo goes out after the answer (on the worker's Redis connection, flushed by its
        // loop): on a loaded machine this check can run first, so it waits for it.
        #expect(eventually { (try? sso.currentDigest(ofFamilyOf: token.text)) == token.digest }, "the rotation on the primary was taken back")
        #expect(try sso.redis("HGET", familyKey, "rev") == "0")
        // Its retry, once the replica confirms again (here: the same refusal, and still the same token current).
        let (again, _) = try sso.refresh(mac, token: token.text)
        #expect(again.status == 503 && again.oauthError == "temporarily_unavailable", "not reuse: \(again.text)")
        #expect(eventually { (try? sso.currentDigest(ofFamilyOf: token.text)) == token.digest })
    }

    /// A grace answer (the rotated token presented again) no replica confirmed is taken back to
    /// the successor it replaced: that one current again, no sibling kept.
    @Test func aGraceAnswerNoReplicaConfirmedIsTakenBackToTheSuccessorItReplaced() throws {
        let unreplicated = "redis:\n  url: \(TestGateway.sharedRedisURL)\n  timeout: 2s\n  wait_replicas: 1\n  wait_timeout: 50ms\n"
        let sso = try PlatformSSOGateway(settings: PlatformSSOFamilyTests.lifetimes, gatewayYAML: unreplicated)
        defer { sso.stop() }
        let mac = try sso.newMac()
        #expect(try sso.register(mac).status == 201)
        // A family whose token `rotated` was rotated to `successor` just now, as Redis would hold it.
        let rotated = PlatformSSORefreshToken.newFamily(using: SecureRandomBuffer())
        let successor = rotated.successor(using: SecureRandomBuffer())
        let familyKey = "ag:{\(sso.appID)}:psso:fam:\(rotated.familyID)"
        let epoch = try sso.redis("HGET", "ag:{\(sso.appID)}:psso:dev:\(mac.keyID.urlSafe)", "epoch")
        let now = String(sso.time.nowMicroseconds / 1000)
        _ = try sso.redis("HSET", familyKey, "kid", mac.keyID.urlSafe, "epoch", epoch, "created", now, "last", now,
                          "cur", successor.digest, "prev", rotated.digest, "rot", now, "rev", "0")
        for token in [rotated, successor] { _ = try sso.redis("SET", "ag:{\(sso.appID)}:psso:rt:\(token.digest)", token.familyID) }

        let (refused, _) = try sso.refresh(mac, token: rotated.text)
        #expect(refused.status == 503 && refused.oauthError == "temporarily_unavailable", "\(refused.text)")
        #expect(eventually { (try? sso.currentDigest(ofFamilyOf: rotated.text)) == successor.digest }, "the replaced successor is current again")
        #expect(try sso.redis("HGET", familyKey, "prev") == rotated.digest)
        #expect(try sso.redis("HGET", familyKey, "alts") == "")
        #expect(try sso.redis("HGET", familyKey, "rev") == "0")
    }
}
