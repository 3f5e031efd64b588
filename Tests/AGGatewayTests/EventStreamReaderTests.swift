import AGEventLoop
import AGPolicy
import AGRedis
import AGTestSupport
import AGSync
import Testing

@testable import AGGateway

/// The events stream reader under a connection that is killed, and a server frozen past the
/// read deadline, again and again: every event arrives once, in order (issue 9 item 2; with
/// Pub/Sub, each of these lost whatever was published meanwhile).
@Suite struct EventStreamReaderTests {
    @Test func everyEventArrivesOnceInOrderThroughKillsAndFreezes() async throws {
        try await RedisServer.withPrivate { server in
            try await TestEventLoop.with { loop in
                let received = Locked<[String]>([])
                let resumes = Locked(0)
                let reader = await loop.make { base in
                    EventStreamReader(url: server.url, loop: base, timeout: .milliseconds(200), blockTime: .milliseconds(200),
                                      onEvents: { entries in
                                          received.withLock { $0 += entries.map { String(decoding: $0.json, as: UTF8.self) } }
                                      }, onResume: { resumes.withLock { $0 += 1 } })
                }
                try await TestEventLoop.with { writerLoop in
                    let writer = await writerLoop.make { base in RedisClient(url: server.url, loop: base, timeout: .seconds(5)) }
                    @Sendable func send(_ arguments: [String]) async -> Result<RedisValue, RedisError> {
                        await writerLoop.await { _, done in writer.value.send(arguments) { done($0) } }
                    }
                    // The reader has found the stream's end once it blocks in XREAD.
                    #expect(await eventually { (try? await send(["CLIENT", "LIST"]).get().string?.contains("cmd=xread")) == true })
                    var kills = 0
                    for index in 1...60 {
                        _ = try await send(GatewayEvents.append(String(index))).get()
                        if index % 10 == 0 {
                            // Wait until the reader is back, then cut it off again.
                            var id: String?
                            let deadline = ContinuousClock.now + .seconds(5)
                            while id == nil, ContinuousClock.now < deadline {
                                id = try await readerConnection(send)
                                if id == nil { try await Task.sleep(for: .milliseconds(10)) }
                            }
                            if let id, (try? await send(["CLIENT", "KILL", "ID", id]).get()) == .integer(1) { kills += 1 }
                        }
                        if index % 20 == 5 {
                            // Longer than the reader's deadline (block 200 ms + timeout 200 ms).
                            _ = try await send(["CLIENT", "PAUSE", "700", "ALL"]).get()
                        }
                    }
                    #expect(await eventually(10) { received.withLock { $0.count } >= 60 })
                    #expect(received.withLock { $0 } == (1...60).map(String.init))
                    #expect(kills == 6)
                    let expectedResumes = kills + 1
                    #expect(await eventually { resumes.withLock { $0 } >= expectedResumes }, "every reconnect lets the owner re-read")
                    await writerLoop.submit { _ in writer.value.close() }
                }
                await loop.submit { _ in reader.value.close() }
            }
        }
    }

    /// The id of the connection blocked in (or last running) XREAD.
    private func readerConnection(_ send: (([String]) async -> Result<RedisValue, RedisError>)) async throws -> String? {
        let clients = try await send(["CLIENT", "LIST"]).get().string ?? ""
        return clients.split(separator: "\n").first { $0.contains("cmd=xread") || $0.contains("cmd=xrevrange") }
            .flatMap { $0.split(separator: " ").first { $0.hasPrefix("id=") } }.map { String($0.dropFirst(3)) }
    }
}
