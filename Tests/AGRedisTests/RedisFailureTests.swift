import AGRedis
import AGTestSupport
import Synchronization
import Testing

/// Tests that pause, kill, restart or reconfigure their own private server.
@Suite struct RedisFailureTests {
    @Test func pausedServerTimesOutThenRecovers() async throws {
        try await RedisServer.withPrivate { server in
            let timeout = Duration.milliseconds(300)
            try await ClientHarness.with(server.url, timeout: timeout) { redis in
                try await redis.waitUntil(.connected)
                server.pause()
                // Several pipelined commands: each times out exactly once (a second completion
                // would trap in the continuation), and late replies after resume are dropped.
                let outcomes: [(Result<RedisValue, RedisError>, Duration)] = await redis.loop.await { _, done in
                    let start = ContinuousClock.now
                    var outcomes: [(Result<RedisValue, RedisError>, Duration)] = []
                    for index in 0..<3 {
                        redis.client.value.send(["SET", "paused:\(index)", "v"]) { result in
                            outcomes.append((result, ContinuousClock.now - start))
                            if outcomes.count == 3 { done(outcomes) }
                        }
                    }
                }
                for (result, elapsed) in outcomes {
                    #expect(result == .failure(.timeout))
                    #expect(elapsed >= timeout)
                    #expect(elapsed < timeout * 2)
                }
                server.resume()
                #expect(try await redis.value(["PING"]) == .status("PONG"))
                #expect(try await redis.value(["GET", "paused:2"]) == "v")
                #expect(await redis.state == .connected)
            }
        }
    }

    /// A completion run by the deadline timer may send again (the gateway retries, the stream
    /// reader re-reads): that used to modify the pending queue during its own expiry pass.
    @Test func aTimedOutCompletionMaySendAgain() async throws {
        try await RedisServer.withPrivate { server in
            try await ClientHarness.with(server.url, timeout: .milliseconds(200)) { redis in
                try await redis.waitUntil(.connected)
                server.pause()
                let outcomes: [Result<RedisValue, RedisError>] = await redis.loop.await { _, done in
                    let client = redis.client.value
                    client.send(["PING"]) { first in
                        client.send(["PING"]) { second in done([first, second]) }
                    }
                }
                server.resume()
                #expect(outcomes == [.failure(.timeout), .failure(.timeout)])
                #expect(try await redis.value(["PING"]) == .status("PONG"))
            }
        }
    }

    @Test func killedServerFailsFastThenReconnectsAfterRestart() async throws {
        try await RedisServer.withPrivate { server in
            let timeout = Duration.milliseconds(500)
            try await ClientHarness.with(server.url, timeout: timeout) { redis in
                try await redis.waitUntil(.connected)
                _ = try await redis.value(["SET", "survives", "no"])
                server.kill()

                let (first, elapsed) = await redis.timedSend(["GET", "survives"])
                #expect(first.isUnavailable || first == .failure(.timeout))
                #expect(elapsed < timeout * 2)

                try await redis.waitUntil(.disconnected)
                // While disconnected, commands fail before `send` returns: never a hang. (On a
                // loaded machine a reconnect attempt may already be under way; then the command
                // waits for it like any other and the deadline above bounds it.)
                let (immediate, wasDisconnected): (Bool, Bool) = await redis.loop.await { _, done in
                    let disconnected = redis.client.value.state == .disconnected
                    var completed = false
                    redis.client.value.send(["PING"]) { result in
                        completed = result.isUnavailable
                    }
                    done((completed, disconnected))
                }
                #expect(immediate || !wasDisconnected)

                try await server.restart()
                try await redis.waitUntil(.connected)
                #expect(try await redis.value(["SET", "after", "restart"]) == .status("OK"))
                #expect(try await redis.value(["GET", "after"]) == "restart")
                let states = redis.states.all
                #expect(states.first == .connected)
                #expect(states.contains(.disconnected))
                #expect(states.last == .connected)
            }
        }
    }

    @Test func connectFailureIsReportedAndRetried() async throws {
        let server = try await RedisServer.start()
        server.stop()
        try await ClientHarness.with(server.url, timeout: .milliseconds(300)) { redis in
            try await redis.waitUntil(.disconnected)
            let lastError = await redis.loop.submit { _ in redis.client.value.lastError }
            #expect(lastError?.isEmpty == false)
            #expect(await redis.send(["PING"]).isUnavailable)
            try await server.restart()
            try await redis.waitUntil(.connected)
            #expect(try await redis.value(["PING"]) == .status("PONG"))
        }
        server.stop()
    }

    @Test func authenticatesWithPasswordAndACLUser() async throws {
        try await RedisServer.withPrivate(password: "s3cr3t pass") { server in
            try await ClientHarness.with(server.url) { redis in
                try await redis.waitUntil(.connected)
                #expect(try await redis.value(["SET", "k", "v"]) == .status("OK"))
            }
            var asDefaultUser = server.url
            asDefaultUser.username = "default"
            let value = try await ClientHarness.with(asDefaultUser) { redis in try await redis.value(["GET", "k"]) }
            #expect(value == "v")
        }
    }

    @Test func wrongOrMissingPasswordNeverConnects() async throws {
        try await RedisServer.withPrivate(password: "right") { server in
            var wrong = server.url
            wrong.password = "wrong"
            var missing = server.url
            missing.password = nil
            for url in [wrong, missing] {
                try await ClientHarness.with(url, timeout: .milliseconds(500)) { redis in
                    try await redis.waitUntil(.disconnected)
                    let lastError = await redis.loop.submit { _ in redis.client.value.lastError } ?? ""
                    #expect(lastError.contains("WRONGPASS") || lastError.contains("NOAUTH"))
                    #expect(await redis.send(["GET", "k"]).isUnavailable)
                    #expect(!redis.states.all.contains(.connected))
                }
            }
        }
    }

    @Test func connectsOverUnixSocketWithDatabase() async throws {
        try await RedisServer.withPrivate { server in
            let url = try RedisURL(parsing: "unix://\(server.unixSocketPath)?db=5")
            try await ClientHarness.with(url) { redis in
                #expect(try await redis.value(["SET", "over-unix", "yes"]) == .status("OK"))
                let clientInfo = try await redis.value(["CLIENT", "INFO"]).string ?? ""
                #expect(clientInfo.contains("db=5"))
            }
            try await ClientHarness.with(server.url) { redis in
                #expect(try await redis.value(["GET", "over-unix"]) == .null)
                _ = try await redis.value(["SELECT", "5"])
                #expect(try await redis.value(["GET", "over-unix"]) == "yes")
            }
        }
    }

    @Test func scriptsReloadAfterScriptFlush() async throws {
        try await RedisServer.withPrivate { server in
            try await ClientHarness.with(server.url) { redis in
                let script = RedisScript("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}")
                #expect(try await redis.value(["SCRIPT", "LOAD", script.source]).string == script.sha1)
                _ = try await redis.value(["SCRIPT", "FLUSH"])
                #expect(try await redis.value(["SCRIPT", "EXISTS", script.sha1]) == [0])

                let result: Result<RedisValue, RedisError> = await redis.loop.await { _, done in
                    redis.client.value.evalScript(script, keys: ["hits"], args: ["x"]) { done($0) }
                }
                #expect(result == .success(["hits", "x", 1]))
                // The retry with EVAL cached the script again.
                #expect(try await redis.value(["SCRIPT", "EXISTS", script.sha1]) == [1])

                let broken = RedisScript("return redis.call('NOSUCHCOMMAND')")
                let failure: Result<RedisValue, RedisError> = await redis.loop.await { _, done in
                    redis.client.value.evalScript(broken) { done($0) }
                }
                guard case .failure(.server(let message)) = failure else {
                    Issue.record("expected a script error, got \(failure)")
                    return
                }
                #expect(!message.hasPrefix("NOSCRIPT"))
            }
        }
    }

    @Test func closeCompletesPendingCommandsAndRejectsNewOnes() async throws {
        try await RedisServer.withPrivate { server in
            try await ClientHarness.with(server.url, timeout: .seconds(5)) { redis in
                try await redis.waitUntil(.connected)
                server.pause()
                let results: [Result<RedisValue, RedisError>] = await redis.loop.await { _, done in
                    let client = redis.client.value
                    var results: [Result<RedisValue, RedisError>] = []
                    client.send(["PING"]) { results.append($0) }
                    client.close()
                    client.send(["PING"]) { results.append($0) }
                    done(results)
                }
                server.resume()
                #expect(results.count == 2)
                #expect(results.allSatisfy { $0.isUnavailable })
                #expect(await redis.state == .closed)
            }
        }
    }
}
