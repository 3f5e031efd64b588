import AGEventLoop
import AGRedis
import AGTestSupport
import Synchronization
import Testing

@Suite struct RedisSubscriberTests {
    @Test func deliversMessagesAndResubscribesAfterRestart() async throws {
        try await RedisServer.withPrivate { server in
            try await TestEventLoop.with { loop in
                let (messages, sink) = AsyncStream.makeStream(of: RedisMessage.self)
                let subscriber = await loop.make { base in
                    // A generous health-check timeout: a PING slowed by a loaded machine must not
                    // reconnect the subscriber in the middle of this test.
                    RedisSubscriber(url: server.url, loop: base, channels: ["ag:events", "other", "ag:events"],
                                    timeout: .seconds(3),
                                    reconnectPolicy: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))) {
                        sink.yield($0)
                    }
                }
                var received = messages.makeAsyncIterator()
                try await ClientHarness.with(server.url) { publisher in
                    try await waitUntilSubscribed(subscriber)
                    #expect(try await publisher.value(["PUBLISH", "ag:events", "tier-changed"]) == 1)
                    #expect(try await publisher.value(["PUBLISH", "other", "x"]) == 1)
                    #expect(try await publisher.value(["PUBLISH", "unrelated", "y"]) == 0)
                    #expect(await received.next() == RedisMessage(channel: "ag:events", payload: Array("tier-changed".utf8)))
                    #expect(await received.next()?.string == "x")
                }

                server.stop()
                try await waitUntil(subscriber, is: .disconnected)
                try await server.restart()
                try await waitUntilSubscribed(subscriber)

                let receivers = try await ClientHarness.with(server.url) { publisher in
                    try await publisher.value(["PUBLISH", "ag:events", "after-restart"])
                }
                #expect(receivers == 1)
                #expect(await received.next()?.string == "after-restart")
                await loop.submit { _ in subscriber.value.close() }
                sink.finish()
            }
        }
    }

    @Test func pausedServerIsDetectedByHealthCheckAndSubscriptionRecovers() async throws {
        try await RedisServer.withPrivate { server in
            try await TestEventLoop.with { loop in
                let (messages, sink) = AsyncStream.makeStream(of: RedisMessage.self)
                let subscriber = await loop.make { base in
                    RedisSubscriber(url: server.url, loop: base, channels: ["ag:events"],
                                    timeout: .milliseconds(200),
                                    reconnectPolicy: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100))) {
                        sink.yield($0)
                    }
                }
                try await waitUntilSubscribed(subscriber)
                server.pause()
                try await waitUntil(subscriber, is: .disconnected)
                let lastError = await loop.submit { _ in subscriber.value.lastError } ?? ""
                #expect(lastError.contains("timed out"))
                server.resume()
                try await waitUntilSubscribed(subscriber)

                let receivers = try await ClientHarness.with(server.url) { publisher in
                    // The abandoned connection's close reaches the resumed server asynchronously,
                    // and on a loaded machine the 200 ms health check may cycle the connection once
                    // more: publish until exactly one subscription receives it.
                    let deadline = ContinuousClock.now + .seconds(10)
                    var receivers: RedisValue = 0
                    while ContinuousClock.now < deadline {
                        if try await publisher.value(["PUBSUB", "NUMSUB", "ag:events"]) == ["ag:events", 1] {
                            receivers = try await publisher.value(["PUBLISH", "ag:events", "still-listening"])
                            if receivers == 1 { break }
                        }
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    return receivers
                }
                #expect(receivers == 1)
                var received = messages.makeAsyncIterator()
                #expect(await received.next()?.string == "still-listening")
                await loop.submit { _ in subscriber.value.close() }
                sink.finish()
            }
        }
    }

    @Test func subscriberWithWrongPasswordKeepsRetrying() async throws {
        try await RedisServer.withPrivate(password: "right") { server in
            var wrongPassword = server.url
            wrongPassword.password = "wrong"
            let wrong = wrongPassword
            await TestEventLoop.with { loop in
                let subscriber = await loop.make { base in
                    RedisSubscriber(url: wrong, loop: base, channels: ["ag:events"]) { _ in }
                }
                try? await waitUntil(subscriber, is: .disconnected)
                let (subscribed, lastError) = await loop.submit { _ in
                    (subscriber.value.isSubscribed, subscriber.value.lastError)
                }
                #expect(!subscribed)
                #expect(lastError?.contains("WRONGPASS") == true)
                await loop.submit { _ in subscriber.value.close() }
            }
        }
    }

    private func waitUntilSubscribed(_ subscriber: LoopBound<RedisSubscriber>) async throws {
        try await waitUntil(subscriber, is: .connected)
    }

    private func waitUntil(_ subscriber: LoopBound<RedisSubscriber>, is expected: RedisConnectionState) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while await subscriber.loop.submit({ _ in subscriber.value.state }) != expected {
            guard ContinuousClock.now < deadline else {
                Issue.record("subscriber never reached \(expected)")
                throw HarnessTimeout()
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
