import AGDevice
import AGTestSupport
import Foundation
import AGSync
import Testing

/// Parallel requests over real sockets to a two-worker gateway: a nonce serves once, a refresh
/// token rotates once.
@Suite("Platform SSO under parallel requests, end to end")
struct PlatformSSOConcurrencyTests {
    /// Sends every body at once, each on its own connection; the responses in body order.
    func parallel(_ sso: PlatformSSOGateway, _ bodies: [[UInt8]]) -> [TestResponse?] {
        let results = Locked([TestResponse?](repeating: nil, count: bodies.count))
        let port = sso.gateway.port
        DispatchQueue.concurrentPerform(iterations: bodies.count) { index in
            let response = try? HTTPTestClient.send(port: port, "POST", "/psso/token",
                                                    headers: [("Content-Type", "application/x-www-form-urlencoded")], body: bodies[index])
            results.withLock { $0[index] = response }
        }
        return results.withLock { $0 }
    }

    @Test func aNonceServesExactlyOneOf16ParallelRequests() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let nonce = try sso.nonce()
        let body = PlatformSSOGateway.form(try sso.request(mac, token: token, nonce: nonce).signed(by: mac))
        let responses = parallel(sso, Array(repeating: body, count: 16))
        #expect(responses.allSatisfy { $0 != nil })
        #expect(responses.filter { $0?.status == 200 }.count == 1)
        let refused = responses.filter { $0?.status == 400 }
        #expect(refused.count == 15)
        #expect(refused.allSatisfy { $0?.oauthError == "invalid_grant" && $0?.json["error_description"] as? String == "nonce already used" })
        #expect(try sso.nonceState(nonce).hasPrefix("used:"))
    }

    @Test func aTokenUsedTwiceInParallelRotatesOnceWithoutGrace() throws {
        let sso = try PlatformSSOGateway(settings: ["reuse_grace: 0s"])
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let bodies = try (0..<2).map { _ in PlatformSSOGateway.form(try sso.request(mac, token: token, nonce: try sso.nonce()).signed(by: mac)) }
        let responses = parallel(sso, bodies)
        #expect(responses.compactMap { $0?.status }.sorted() == [200, 401])
        let loser = try #require(responses.first { $0?.status == 401 } ?? nil)
        #expect(loser.oauthError == "invalid_grant")
        // The second use of one token is reuse: the family, the winner's successor included, is revoked.
        #expect(try sso.familyRevoked(token))
    }

    @Test func aTokenUsedTwiceInParallelWithinGraceLeavesOneValidSuccessor() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let (mac, token) = try sso.enrolledMac()
        let requests = try (0..<2).map { _ in sso.request(mac, token: token, nonce: try sso.nonce()) }
        let responses = parallel(sso, try requests.map { PlatformSSOGateway.form(try $0.signed(by: mac)) })
        let successors = try zip(responses, requests).map { response, request in
            try sso.login(try #require(response), mac, request).refreshToken
        }
        // The later commit's successor is current; the earlier one's stays valid beside it,
        // since its answer may be the one that reached the Mac last (stop 35's race sweep).
        let current = try sso.currentDigest(ofFamilyOf: token)
        #expect(successors.filter { PlatformSSOGateway.digest($0) == current }.count == 1)
        #expect(try !sso.familyRevoked(token))
        let kept = try #require(successors.first { PlatformSSOGateway.digest($0) != current })
        _ = try sso.rotate(mac, token: kept)
        #expect(try !sso.familyRevoked(token))
    }
}
