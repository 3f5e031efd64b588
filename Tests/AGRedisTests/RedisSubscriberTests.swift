import AGEventLoop
import AGRedis
import AGTestSupport
import AGSync
import Testing

@Suite struct RedisSubscriberTests {
    /// Like `aClientReleasedWhileConnectedClosesWithoutCallingBack`: a subscriber released
    /// while subscribed, without `close()`, trapped on the unowned reference to itself.
    @Test func aSubscriberReleasedWhileSubscribedClosesWithoutCallingBack() async throws {
        try await RedisServer.withShared { url in
            await TestEventLoop.with { loop in
                let states = Locked<[RedisConnectionState]>([])
                let holder = SubscriberHolder()
                await loop.submit { base in
                    let subscriber = RedisSubscriber(url: url, loop: base, channels: ["ag:release-test"]) { _ in }
                    subscriber.onStateChange = { state in states.withLock { $0.append(state) } }
                    holder.subscriber = subscriber
                }
                #expect(await eventually(10) { states.withLock { $0.contains(.connected) } }, "subscribed")
                await loop.submit { _ in holder.subscriber = nil }
                #expect(!states.withLock { $0.contains(.closed) }, "the owner is not told of its own release")
            }
        }
    }

    /// Holds the subscriber: created and dropped on the loop thread only.
    private final class SubscriberHolder: @unchecked Sendable {
        var subscriber: RedisSubscriber?
    }

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
                // Closed on its loop even when a step fails: released on a test thread, its
                // connection's deinit would trap ("used off its event loop thread") and end the run.
                try await withCleanup {
                    try await waitUntilSubscribed(subscriber)
                    server.pause()
                    // Not `.disconnected` itself: against the frozen server the subscriber cycles
                    // between a short `.disconnected` (the reconnect delay, 20–100 ms) and a 200 ms
                    // `.connecting`, and under ASan a 10 ms poll through the loop missed the short
                    // state for 10 s. Leaving `.connected` at all is the health check's verdict.
                    try await waitUntil(subscriber, isNot: .connected)
                    let lastError = await loop.submit { _ in subscriber.value.lastError } ?? ""
                    // The health check's verdict, or (if a reconnect attempt already met the frozen
                    // server) the handshake's timeout.
                    #expect(lastError.contains("SUBSCRIBE not confirmed within") || lastError.contains("failed during connect: timed out"))
                    server.resume()
                    try await waitUntilSubscribed(subscriber)

                    let receivers = try await ClientHarness.with(server.url) { publisher in
                        // The abandoned connection's close reaches the resumed server asynchronously,
                        // and on a loaded machine the 200 ms health check may cycle the connection once
                        // more: publish until exactly one subscription receives it.
                        var receivers: RedisValue = 0
                        _ = try await poll(within: .seconds(10)) {
                            guard try await publisher.value(["PUBSUB", "NUMSUB", "ag:events"]) == ["ag:events", 1] else { return false }
                            receivers = try await publisher.value(["PUBLISH", "ag:events", "still-listening"])
                            return receivers == 1
                        }
                        return receivers
                    }
                    #expect(receivers == 1)
                    var received = messages.makeAsyncIterator()
                    #expect(await received.next()?.string == "still-listening")
                } cleanup: {
                    await loop.submit { _ in subscriber.value.close() }
                    sink.finish()
                }
            }
        }
    }

    /// Regression (issue 9 item 2): hiredis 0.14 files a command sent in subscribed mode under
    /// `sub.invalid` but routes the `["pong", ""]` array reply by channel name, so a `PING`
    /// health check never completed and the connection was dropped every two intervals.
    @Test func idleSubscriberKeepsOneConnectionAndEveryMessage() async throws {
        try await RedisServer.withPrivate { server in
            try await TestEventLoop.with { loop in
                let received = Locked<[Int]>([])
                let interval = Duration.milliseconds(250)
                let subscriber = await loop.make { base in
                    RedisSubscriber(url: server.url, loop: base, channels: ["ag:events"], timeout: interval,
                                    reconnectPolicy: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100))) { message in
                        if let sequence = Int(message.string) { received.withLock { $0.append(sequence) } }
                    }
                }
                try await waitUntilSubscribed(subscriber)
                try await ClientHarness.with(server.url) { publisher in
                    let connectionsBefore = try await connectionsReceived(publisher)
                    var connectionIDs: Set<String> = []
                    var published = 0
                    // Eight health-check intervals of a steady stream, sampling the subscriber's
                    // connection id on the server as we go.
                    let end = ContinuousClock.now + interval * 8
                    while ContinuousClock.now < end {
                        published += 1
                        _ = try await publisher.value(["PUBLISH", "ag:events", String(published)])
                        let clients = try await publisher.value(["CLIENT", "LIST", "TYPE", "pubsub"]).string ?? ""
                        for line in clients.split(separator: "\n") {
                            if let id = line.split(separator: " ").first(where: { $0.hasPrefix("id=") }) {
                                connectionIDs.insert(String(id))
                            }
                        }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    let total = published
                    let deadline = ContinuousClock.now + .seconds(5)
                    while received.withLock({ $0.count }) < total, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    #expect(connectionIDs.count == 1, "subscriber connections seen: \(connectionIDs.sorted())")
                    #expect(received.withLock { $0 } == Array(1...total))
                    #expect(try await connectionsReceived(publisher) == connectionsBefore, "the subscriber never reconnected")
                }
                await loop.submit { _ in subscriber.value.close() }
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

    private func connectionsReceived(_ redis: ClientHarness) async throws -> Int? {
        let stats = try await redis.value(["INFO", "stats"]).string ?? ""
        return stats.split(separator: "\r\n").first { $0.hasPrefix("total_connections_received:") }
            .flatMap { Int($0.split(separator: ":")[1]) }
    }

    private func waitUntilSubscribed(_ subscriber: LoopBound<RedisSubscriber>) async throws {
        try await waitUntil(subscriber, is: .connected)
    }

    private func waitUntil(_ subscriber: LoopBound<RedisSubscriber>, is expected: RedisConnectionState) async throws {
        guard await poll(within: .seconds(10), { await subscriber.loop.submit({ _ in subscriber.value.state }) == expected }) else {
            Issue.record("subscriber never reached \(expected)")
            throw HarnessTimeout()
        }
    }

    private func waitUntil(_ subscriber: LoopBound<RedisSubscriber>, isNot left: RedisConnectionState) async throws {
        guard await poll(within: .seconds(10), { await subscriber.loop.submit({ _ in subscriber.value.state }) != left }) else {
            Issue.record("subscriber never left \(left)")
            throw HarnessTimeout()
        }
    }
}
