#if canImport(Glibc)
import Glibc
#endif
import AGEventLoop
import AGConfig
import AGPolicy
import AGGateway
import AGRedis
import Foundation

/// One simulated gateway instance for rate-limit tests: its own event loop, Redis client and
/// `RateLimiter`, driven from async test code.
public final class RateLimitTestInstance: Sendable {
    public let loop: TestEventLoop
    private let parts: LoopBound<Parts>

    final class Parts {
        let redis: RedisClient
        let limiter: RateLimiter
        var modeChanges: [RateLimiter.Mode] = []

        init(redis: RedisClient, limiter: RateLimiter) {
            self.redis = redis
            self.limiter = limiter
        }
    }

    /// Runs `body` with a fresh instance on its own loop; closes the connection and stops the
    /// loop afterwards, even if `body` throws or returns early.
    /// - Parameter logPath: where the limiter logs (JSON lines); nowhere when nil.
    /// - Parameter timeout: the Redis deadline of every command.
    public static func with<R>(_ url: RedisURL, time: any TimeSource = SystemTime(), localBuckets: LocalBuckets? = nil,
                               logPath: String? = nil, timeout: Duration = .milliseconds(250), _ body: (RateLimitTestInstance) async throws -> R) async throws -> R {
        let logger = Logger(level: .debug, format: .json,
                            fileDescriptor: open(logPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644))
        // Closed only once the loop has stopped, so no late log line can land in a reused descriptor.
        defer { if logger.fileDescriptor >= 0 { Glibc.close(logger.fileDescriptor) } }
        return try await TestEventLoop.with { loop in
            let instance = await RateLimitTestInstance(loop: loop, url: url, time: time, timeout: timeout,
                                                       localBuckets: localBuckets ?? LocalBuckets(time: time), logger: logger)
            return try await withCleanup { try await body(instance) } cleanup: { await instance.close() }
        }
    }

    private init(loop: TestEventLoop, url: RedisURL, time: any TimeSource, timeout: Duration, localBuckets: LocalBuckets, logger: Logger) async {
        self.loop = loop
        parts = await loop.make { base in
            let redis = RedisClient(url: url, loop: base, timeout: timeout,
                                    reconnectPolicy: RedisReconnectPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(100)))
            let parts = Parts(redis: redis, limiter: RateLimiter(redis: redis, localBuckets: localBuckets, time: time, logger: logger))
            parts.limiter.onModeChange = { [unowned parts] mode in parts.modeChanges.append(mode) }
            return parts
        }
    }

    /// One rate-limit decision.
    public func check(_ checks: [BucketCheck], fallback: RateLimitFallback = .refuse) async -> RateLimitOutcome {
        let parts = self.parts
        return await loop.await { _, done in parts.value.limiter.check(checks, fallback: fallback) { done($0) } }
    }

    /// `count` decisions sent back to back (pipelined on the one connection), in order.
    public func burst(_ count: Int, _ checks: [BucketCheck], fallback: RateLimitFallback = .refuse) async -> [RateLimitOutcome] {
        let parts = self.parts
        return await loop.await { _, done in
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

    /// `count` requests admitted through the worker's `api` lease, all started at once; the
    /// device epoch key is the bucket's tenant's (`ag:{APPID}:devepoch`).
    public func leaseBurst(_ count: Int, _ check: BucketCheck, fallback: RateLimitFallback = .local) async -> [RateLimitOutcome] {
        let parts = self.parts
        let epochKey = String(check.key.prefix { $0 != "}" }) + "}:devepoch"
        return await loop.await { _, done in
            var outcomes = [RateLimitOutcome?](repeating: nil, count: count)
            var left = count
            for index in 0..<count {
                parts.value.limiter.lease(check, epochKey: epochKey, fallback: fallback) { outcome in
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
        return await loop.await { _, done in parts.value.redis.send(arguments) { done($0) } }
    }

    public var isConnected: Bool {
        get async {
            let parts = self.parts
            return await loop.submit { _ in parts.value.redis.isConnected }
        }
    }

    public var mode: RateLimiter.Mode {
        get async {
            let parts = self.parts
            return await loop.submit { _ in parts.value.limiter.mode }
        }
    }

    /// Every mode switch reported to `onModeChange`, in order.
    public var modeChanges: [RateLimiter.Mode] {
        get async {
            let parts = self.parts
            return await loop.submit { _ in parts.value.modeChanges }
        }
    }

    /// Closes the connection on its loop, before `with` stops the loop.
    private func close() async {
        let parts = self.parts
        await loop.submit { _ in parts.value.redis.close() }
    }
}
