import AGCrypto
import AGTestSupport
import Foundation
import Testing

/// What the gateway does while its Redis is down, paused or back: each test owns its Redis.
@Suite("Redis failure behaviour, end to end")
struct RedisFailureTests {
    let teamID = TestGateway.randomTeamID()
    var headers: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")] }

    @Test func readinessAndChallengeFollowRedis() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
            defer { gateway.stop() }
            #expect(try eventually { try gateway.send("GET", "/readyz").status == 200 })
            #expect(try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).status == 200)

            redis.kill()
            let started = Date()
            let challenge = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
            #expect(challenge.status == 503)
            #expect(challenge.code == "store_unavailable")
            let ready = try gateway.send("GET", "/readyz")
            #expect(ready.status == 503)
            #expect(ready.code == "store_unavailable")
            #expect(Date().timeIntervalSince(started) < 2, "answers at once, never hangs")
            #expect(try gateway.send("GET", "/healthz").status == 200, "liveness does not depend on Redis")

            try await redis.restart()
            #expect(try eventually(10) { try gateway.send("GET", "/readyz").status == 200 }, "recovers by itself")
            #expect(try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).status == 200)
        }
    }

    @Test func aFrozenRedisCostsAtMostTheTimeout() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], redisTimeout: "300ms")
            defer { gateway.stop() }
            #expect(try eventually { try gateway.send("GET", "/readyz").status == 200 })
            redis.pause()
            defer { redis.resume() }
            let started = Date()
            let challenge = try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers)
            let elapsed = Date().timeIntervalSince(started)
            #expect(challenge.status == 503)
            #expect(challenge.code == "store_unavailable")
            #expect(elapsed >= 0.25 && elapsed < 2, "bounded by redis.timeout (300ms), took \(elapsed)s")
            redis.resume()
            #expect(try eventually(10) { try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers).status == 200 })
        }
    }

    @Test func refreshFailsClosedWhileRedisIsDown() async throws {
        try await RedisServer.withPrivate { redis in
            let gateway = try TestGateway(redisURL: "redis://127.0.0.1:\(redis.port)/0",
                                          tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
            defer { gateway.stop() }
            redis.kill()
            let hash = Data(SHA256.hash(Array("abc".utf8))).base64EncodedString()
            let valid = #"{"keyId":"\#(Data(repeating: 7, count: 32).base64EncodedString())","assertion":"AAAA","clientDataHash":"\#(hash)","challenge":"abc"}"#
            let refresh = try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers, body: Array(valid.utf8))
            #expect(refresh.status == 503)
            #expect(refresh.code == "store_unavailable")
        }
    }
}
