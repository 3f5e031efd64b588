#if canImport(Glibc)
import Glibc
#endif
import AGGateway
import AGRedis
import Foundation
import Synchronization

/// One simulated gateway instance for rate-limit tests: its own event loop, Redis client and
/// `RateLimiter`, driven from async test code.
public final class RateLimitTestInstance: Sendable {
    public let testLoop: RateLimitTestLoop
    private let parts: LoopConfined<Parts>
    private let closed = Atomic(false)

    final class Parts {
        let redis: RedisClient
        let limiter: RateLimiter
        var modeChanges: [RateLimiter.Mode] = []

        init(redis: RedisClient, limiter: RateLimiter) {
            self.redis = redis
            self.limiter = limiter
        }
    }

    /// - Parameter logPath: where the limiter logs (JSON lines); nowhere when nil.
    public init(redisURL: String, localBuckets: LocalBuckets = LocalBuckets(), logPath: String? = nil) async throws {
        let url = try RedisURL(parsing: redisURL)
        let testLoop = RateLimitTestLoop()
        self.testLoop = testLoop
        let fd = open(logPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let logger = Logger(level: .debug, format: .json, fileDescriptor: fd)
        parts = await testLoop.sync {
            let redis = RedisClient(url: url, eventBase: testLoop.loop.rawBase, timeout: .milliseconds(250),
                                    reconnectPolicy: RedisReconnectPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100)))
            let parts = Parts(redis: redis, limiter: RateLimiter(redis: redis, localBuckets: localBuckets, logger: logger))
            parts.limiter.onModeChange = { [unowned parts] mode in parts.modeChanges.append(mode) }
            return LoopConfined(parts)
        }
    }

    /// One rate-limit decision.
    public func check(_ checks: [BucketCheck], fallback: RateLimitFallback = .failClosed) async -> RateLimitOutcome {
        let parts = self.parts
        return await testLoop.run { done in parts.value.limiter.check(checks, fallback: fallback, completion: done) }
    }

    /// `count` decisions sent back to back (pipelined on the one connection), in order.
    public func burst(_ count: Int, _ checks: [BucketCheck], fallback: RateLimitFallback = .failClosed) async -> [RateLimitOutcome] {
        let parts = self.parts
        return await testLoop.run { done in
            var outcomes = [RateLimitOutcome?](repeating: nil, count: count)
            var left = count
            for index in 0..<count {
                parts.value.limiter.check(checks, fallback: fallback) { outcome in
                    outcomes[index] = outcome
                    left -= 1
                    if left == 0 { done(outcomes.map { $0! }) }
                }
            }
        }
    }

    /// A raw command on this instance's connection.
    public func send(_ arguments: [String]) async -> Result<RedisValue, RedisError> {
        let parts = self.parts
        return await testLoop.run { done in parts.value.redis.send(arguments, completion: done) }
    }

    public var isConnected: Bool {
        get async {
            let parts = self.parts
            return await testLoop.sync { parts.value.redis.isConnected }
        }
    }

    public var mode: RateLimiter.Mode {
        get async {
            let parts = self.parts
            return await testLoop.sync { parts.value.limiter.mode }
        }
    }

    /// Every mode switch reported to `onModeChange`, in order.
    public var modeChanges: [RateLimiter.Mode] {
        get async {
            let parts = self.parts
            return await testLoop.sync { parts.value.modeChanges }
        }
    }

    /// Closes the connection on its loop, then stops the loop. Also runs on deinit, so a test
    /// that ends early never frees a client off its thread.
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        let parts = self.parts
        let finished = DispatchSemaphore(value: 0)
        testLoop.loop.execute {
            parts.value.redis.close()
            finished.signal()
        }
        finished.wait()
        testLoop.stop()
    }

    deinit {
        close()
    }
}
