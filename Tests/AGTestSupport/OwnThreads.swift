import Foundation
import Synchronization
import Testing

/// `@Suite(.onOwnThreads)` (or on one `@Test`): each test case of the suite runs on threads of
/// its own instead of Swift's cooperative pool. That pool has one thread per core (two here)
/// and the whole suite shares it, so a test that blocks its thread — blocking sockets, a wait
/// on a real server or process, a failover — keeps every other test from running meanwhile,
/// and a `.serialized` suite queues behind all the others between two of its tests. Cases of
/// such suites wait (without holding a thread) for one of `OwnThreads.width` slots, so that a
/// suite of many blocking tests does not start them all at once on a two-core machine.
public struct OwnThreads: SuiteTrait, TestTrait, TestScoping {
    /// How many test cases run on their own threads at once, across all suites.
    public static let width = 6

    public var isRecursive: Bool { true }

    public init() {}

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        // Around each test case, not around the suite as a whole.
        testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        // The trait on a suite and on one of its tests: one slot, not two (which could wait
        // for each other once every slot is taken).
        if OwnThreads.inside {
            try await function()
            return
        }
        await OwnThreads.gate.enter()
        defer { OwnThreads.gate.leave() }
        try await OwnThreads.$inside.withValue(true) {
            try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
                try await function()
            }
        }
    }

    @TaskLocal static var inside = false
    static let gate = AsyncGate(width: width)
}

extension Trait where Self == OwnThreads {
    /// Runs each test case on threads of its own, off the cooperative pool (see `OwnThreads`).
    public static var onOwnThreads: Self { OwnThreads() }
}

/// A task executor that runs each job on a new thread: a job may block as long as it likes
/// without holding up any other (the cost, a thread start per job, is small beside a test's
/// blocking waits). Structured child tasks of a test inherit it; unstructured `Task`s do not.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread { job.runSynchronously(on: executor) }.start()
    }
}

/// At most `width` holders at once; others wait in arrival order, suspended, holding no thread.
final class AsyncGate: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(width: Int) {
        state = Mutex(State(free: width))
    }

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
