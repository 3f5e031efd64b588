import AGEventLoop
import AGRedis
import AGTestSupport
import AGSync
import Testing

/// A `RedisClient` on a test loop, driven from async tests.
struct ClientHarness: Sendable {
    let loop: TestEventLoop
    let client: LoopBound<RedisClient>
    let states: StateLog

    /// Runs `body` with a fresh loop and client; closes both afterwards, even on failure.
    static func with<R>(_ url: RedisURL, timeout: Duration = .seconds(2),
                        _ body: (ClientHarness) async throws -> R) async throws -> R {
        try await TestEventLoop.with { loop in
            let states = StateLog()
            let client = await loop.make { base in
                let client = RedisClient(url: url, loop: base, timeout: timeout,
                                         reconnectPolicy: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200)))
                client.onStateChange = { states.append($0) }
                return client
            }
            let harness = ClientHarness(loop: loop, client: client, states: states)
            return try await withCleanup { try await body(harness) } cleanup: { await harness.close() }
        }
    }

    func send(_ arguments: [String]) async -> Result<RedisValue, RedisError> {
        await loop.await { _, done in client.value.send(arguments) { done($0) } }
    }

    func send(bytes arguments: [[UInt8]]) async -> Result<RedisValue, RedisError> {
        await loop.await { _, done in client.value.send(arguments) { done($0) } }
    }

    /// Sends and returns the reply, failing the test on an error.
    func value(_ arguments: [String]) async throws -> RedisValue {
        try await send(arguments).get()
    }

    /// Sends a command and reports how long its completion took, measured on the loop thread.
    func timedSend(_ arguments: [String]) async -> (Result<RedisValue, RedisError>, Duration) {
        await loop.await { _, done in
            let start = ContinuousClock.now
            client.value.send(arguments) { done(($0, ContinuousClock.now - start)) }
        }
    }

    var state: RedisConnectionState {
        get async { await loop.submit { _ in client.value.state } }
    }

    func waitUntil(_ expected: RedisConnectionState, within limit: Duration = .seconds(10)) async throws {
        guard await !poll(within: limit, { await state == expected }) else { return }
        let lastError = await loop.submit { _ in client.value.lastError }
        Issue.record("client never reached \(expected); last error: \(lastError ?? "none")")
        throw HarnessTimeout()
    }

    func close() async {
        await loop.submit { _ in client.value.close() }
    }
}

struct HarnessTimeout: Error {}

/// Collects values reported on the loop thread for inspection from the test.
final class StateLog: Sendable {
    private let entries = Locked<[RedisConnectionState]>([])

    func append(_ state: RedisConnectionState) { entries.withLock { $0.append(state) } }
    var all: [RedisConnectionState] { entries.withLock { $0 } }
}

/// A key no other test (or concurrent test run on a shared server) uses.
func uniqueKey(_ name: String) -> String {
    "agtest:\(name):\(UInt64.random(in: 0...UInt64.max))"
}
