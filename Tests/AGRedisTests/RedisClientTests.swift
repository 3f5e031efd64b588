import AGEventLoop
import AGSync
import AGRedis
import AGTestSupport
import Testing

/// Non-destructive commands: run against the shared server when scripts/test provides one.
@Suite struct RedisClientTests {
    /// A client released while connected, without `close()` first, closes its connections
    /// quietly. Its deinit closed the backend, whose state change called back into the client
    /// through an unowned reference while the client was being destroyed: the process trapped
    /// ("Attempted to read an unowned reference but object … was already destroyed"), as a
    /// cluster test that returned early showed.
    @Test func aClientReleasedWhileConnectedClosesWithoutCallingBack() async throws {
        try await RedisServer.withShared { try await Self.releaseWhileConnected($0) }
        try await RedisCluster.withShared { try await Self.releaseWhileConnected($0) }
        try await RedisSentinelSet.withShared { try await Self.releaseWhileConnected($0) }
    }

    /// Holds the client: created and dropped on the loop thread only.
    private final class Holder: @unchecked Sendable {
        var client: RedisClient?
    }

    private static func releaseWhileConnected(_ url: RedisURL) async throws {
        await TestEventLoop.with { loop in
            let changes = Locked<[RedisConnectionState]>([])
            let holder = Holder()
            let reply = await loop.await { base, done in
                let redis = RedisClient(url: url, loop: base, timeout: .seconds(2))
                redis.onStateChange = { state in changes.withLock { $0.append(state) } }
                holder.client = redis
                redis.send(["PING"]) { done($0) }
            }
            #expect(reply == .success(.status("PONG")), "\(url)")
            await loop.submit { _ in holder.client = nil }
            #expect(!changes.withLock { $0.contains(.closed) }, "the owner is not told of its own release")
        }
    }

    @Test func stringsCountersAndExpiry() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let key = uniqueKey("str")
                #expect(try await redis.value(["SET", key, "hello"]) == .status("OK"))
                #expect(try await redis.value(["GET", key]) == "hello")
                #expect(try await redis.value(["GET", key + ":missing"]) == .null)

                let counter = uniqueKey("ctr")
                #expect(try await redis.value(["INCR", counter]) == 1)
                #expect(try await redis.value(["INCRBY", counter, "41"]) == 42)

                #expect(try await redis.value(["TTL", key]) == -1)
                #expect(try await redis.value(["EXPIRE", key, "100"]) == 1)
                let ttl = try await redis.value(["TTL", key]).int
                #expect(ttl.map { (1...100).contains($0) } == true)
                #expect(try await redis.value(["DEL", key, counter]) == 2)
            }
        }
    }

    @Test func hashes() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let key = uniqueKey("dev")
                #expect(try await redis.value(["HSET", key, "pk", "BASE64", "ctr", "0", "rev", "0"]) == 3)
                #expect(try await redis.value(["HINCRBY", key, "ctr", "5"]) == 5)
                let fields = try await redis.value(["HGETALL", key]).hashFields
                #expect(fields == ["pk": "BASE64", "ctr": "5", "rev": "0"])
                #expect(try await redis.value(["HGET", key, "ctr"]).int == 5)
                _ = try await redis.value(["DEL", key])
            }
        }
    }

    @Test func binarySafeArgumentsAndReplies() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let key = Array(uniqueKey("bin").utf8)
                let payload: [UInt8] = [0, 13, 10, 255, 0x24, 0x2A, 0]
                #expect(try await redis.send(bytes: [Array("SET".utf8), key, payload]).get() == .status("OK"))
                #expect(try await redis.send(bytes: [Array("GET".utf8), key]).get() == .bulk(payload))
                #expect(try await redis.send(bytes: [Array("SET".utf8), key, []]).get() == .status("OK"))
                #expect(try await redis.send(bytes: [Array("GET".utf8), key]).get() == .bulk([]))
                _ = try await redis.send(bytes: [Array("DEL".utf8), key]).get()
            }
        }
    }

    @Test func errorRepliesAreServerErrors() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let key = uniqueKey("wrongtype")
                _ = try await redis.value(["HSET", key, "f", "v"])
                let result = await redis.send(["INCR", key])
                guard case .failure(.server(let message)) = result else {
                    Issue.record("expected a server error, got \(result)")
                    return
                }
                #expect(message.hasPrefix("WRONGTYPE"))
                #expect(await redis.send(["NOSUCHCOMMAND"]).isServerError)
                // The connection stays usable after error replies.
                #expect(try await redis.value(["PING"]) == .status("PONG"))
                _ = try await redis.value(["DEL", key])
            }
        }
    }

    @Test func nestedRepliesKeepTheirShape() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let reply = try await redis.value(["EVAL", "return {1, 'two', {3}, false, redis.error_reply('boom')}", "0"])
                let elements = reply.array ?? []
                #expect(Array(elements.prefix(4)) == [1, "two", [3], .null])
                guard elements.count == 5, case .error(let message) = elements[4] else {
                    Issue.record("expected a nested error, got \(reply)")
                    return
                }
                #expect(message.hasSuffix("boom"))
            }
        }
    }

    @Test func thousandPipelinedCommandsCompleteInOrder() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let key = uniqueKey("pipe")
                let replies: [Int64] = await redis.loop.await { _, done in
                    var collected: [Int64] = []
                    for _ in 0..<1000 {
                        redis.client.value.send(["INCR", key]) { result in
                            collected.append((try? result.get().int) ?? -1)
                            if collected.count == 1000 { done(collected) }
                        }
                    }
                }
                #expect(replies == Array(1...1000))
                _ = try await redis.value(["DEL", key])
            }
        }
    }

    @Test func selectsTheDatabaseFromTheURL() async throws {
        try await RedisServer.withShared { url in
            var db3 = url
            db3.database = 3
            let key = uniqueKey("db")
            try await ClientHarness.with(db3) { redis in
                _ = try await redis.value(["SET", key, "in-db-3"])
            }
            var db0 = url
            db0.database = 0
            let inDB0 = try await ClientHarness.with(db0) { redis in try await redis.value(["GET", key]) }
            #expect(inDB0 == .null)
            try await ClientHarness.with(db3) { redis in
                #expect(try await redis.value(["GET", key]) == "in-db-3")
                _ = try await redis.value(["DEL", key])
            }
        }
    }

    @Test func commandsQueuedBeforeConnectRunAfterTheHandshake() async throws {
        try await RedisServer.withShared { url in
            await TestEventLoop.with { loop in
                let key = uniqueKey("early")
                // Sent in the same loop turn as the client is created, long before it connects.
                let replies: [RedisValue] = await loop.await { base, done in
                    var db = url
                    db.database = 2
                    let client = RedisClient(url: db, loop: base)
                    var replies: [RedisValue] = []
                    for command in [["SET", key, "v"], ["GET", key], ["DEL", key]] {
                        client.send(command) { result in
                            replies.append((try? result.get()) ?? .error("\(result)"))
                            if replies.count == 3 {
                                client.close()
                                done(replies)
                            }
                        }
                    }
                }
                #expect(replies == [.status("OK"), "v", 1])
            }
        }
    }

    @Test func evalScriptRunsWithKeysAndArguments() async throws {
        try await RedisServer.withShared { url in
            try await ClientHarness.with(url) { redis in
                let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
                let key = uniqueKey("script")
                let results: [Result<RedisValue, RedisError>] = await redis.loop.await { _, done in
                    let client = redis.client.value
                    client.evalScript(script, keys: [key], args: ["5"]) { first in
                        client.evalScript(script, keys: [key], args: ["6"]) { second in
                            done([first, second])
                        }
                    }
                }
                #expect(results.map { try? $0.get() } == [5, 11])
                _ = try await redis.value(["DEL", key])
            }
        }
    }
}

extension Result<RedisValue, RedisError> {
    var isServerError: Bool {
        if case .failure(.server) = self { true } else { false }
    }

    var isUnavailable: Bool {
        if case .failure(.unavailable) = self { true } else { false }
    }
}
