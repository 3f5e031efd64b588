import AGEventLoop
import AGHTTP
import Foundation
import AGSync

/// An `EventLoop` running on its own thread, so async tests can hand it work and await results.
public final class TestEventLoop: Sendable {
    public let loop: EventLoop
    private let thread = LoopThreadState()

    /// What the loop thread publishes: its identity, and when it has finished.
    private final class LoopThreadState: Sendable {
        let id = Locked<pthread_t?>(nil)
        /// `true` once the loop returned; otherwise the shutdown waiting for that, if any.
        let exit = Locked<(exited: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
    }

    public init() {
        let loop = EventLoop()
        self.loop = loop
        let state = thread
        let thread = Thread {
            state.id.withLock { $0 = pthread_self() }
            loop.run()
            let waiter = state.exit.withLock { exit in
                exit.exited = true
                return exit.waiter.take()
            }
            waiter?.resume()
        }
        thread.name = "test-event-loop"
        thread.start()
    }

    /// Runs `body` with a fresh loop and stops the loop afterwards, even if `body` throws.
    public static func with<R>(_ body: (TestEventLoop) async throws -> R) async rethrows -> R {
        let testLoop = TestEventLoop()
        return try await withCleanup { try await body(testLoop) } cleanup: { await testLoop.shutdown() }
    }

    /// True on the loop's thread.
    public var inLoopThread: Bool {
        thread.id.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `work` on the loop thread with the loop and returns its result.
    public func submit<T: Sendable>(_ work: @escaping @Sendable (EventLoop) -> T) async -> T {
        await loop.submit(work)
    }

    /// Starts callback-style work on the loop thread and awaits the value it passes to `done`,
    /// which must be called exactly once (a second call traps: useful to catch double completions).
    public func await<T: Sendable>(_ work: @escaping @Sendable (EventLoop, @escaping @Sendable (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { continuation in
            loop.execute { [loop] in
                work(loop) { continuation.resume(returning: $0) }
            }
        }
    }

    /// Creates a loop-confined value (a client, a server) on the loop thread.
    public func make<Value>(_ make: @escaping @Sendable (EventLoop) -> Value) async -> LoopBound<Value> {
        await submit { loop in LoopBound(make(loop), loop: loop) }
    }

    /// Stops the loop and waits for its thread to finish. Close loop-bound resources first.
    public func shutdown() async {
        loop.stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyExited = thread.exit.withLock { exit in
                if exit.exited { return true }
                exit.waiter = continuation
                return false
            }
            if alreadyExited { continuation.resume() }
        }
    }
}

/// Runs `body`, then `cleanup`, whether `body` returned or threw: for scoped test resources.
public func withCleanup<R>(_ body: () async throws -> R, cleanup: () async -> Void) async rethrows -> R {
    let result: R
    do {
        result = try await body()
    } catch {
        await cleanup()
        throw error
    }
    await cleanup()
    return result
}

extension EventLoop {
    /// Runs `work` on this loop's thread and returns its result (for tests holding a `LoopBound`).
    public func submit<T: Sendable>(_ work: @escaping @Sendable (EventLoop) -> T) async -> T {
        await withCheckedContinuation { continuation in
            execute { [self] in continuation.resume(returning: work(self)) }
        }
    }
}
