import AGHTTP
import Foundation

/// An `EventLoop` on its own thread, for tests that drive loop-confined objects (Redis clients,
/// rate limiters) from async test code.
public final class RateLimitTestLoop: Sendable {
    public let loop: EventLoop
    private let stopped = DispatchSemaphore(value: 0)

    public init(name: String = "rate-limit-test-loop") {
        let loop = EventLoop()
        self.loop = loop
        let stopped = self.stopped
        let thread = Thread {
            loop.run()
            stopped.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Runs `body` on the loop thread and returns what it passes to `done` (which must be
    /// called exactly once, on the loop thread, now or later).
    public func run<T: Sendable>(_ body: @escaping (_ done: @escaping (T) -> Void) -> Void) async -> T {
        let work = LoopConfined(body)
        return await withCheckedContinuation { continuation in
            loop.execute {
                work.value { continuation.resume(returning: $0) }
            }
        }
    }

    /// Runs `body` on the loop thread and returns its result.
    public func sync<T: Sendable>(_ body: @escaping () -> T) async -> T {
        await run { done in done(body()) }
    }

    /// Stops the loop and waits for its thread to finish.
    public func stop() {
        loop.stop()
        stopped.wait()
    }
}

/// Carries a loop-confined value to the loop thread.
public struct LoopConfined<Value>: @unchecked Sendable {
    // Invariant: `value` is created on one thread and then only used on the loop thread it was
    // handed to; the two never touch it at the same time.
    public let value: Value

    public init(_ value: Value) {
        self.value = value
    }
}
