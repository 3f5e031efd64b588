import Foundation
import AGSync
import Testing

/// `@Suite(.onOwnThreads)` (or on one `@Test`): each test case of the suite runs on threads of
/// its own instead of Swift's cooperative pool. That pool has one thread per core (two here)
/// and the whole suite shares it, so a test that blocks its thread — blocking sockets, a wait
/// on a real server or process, a failover — keeps every other test from running meanwhile,
/// and a `.serialized` suite queues behind all the others between two of its tests. Cases of
/// such suites wait (without holding a thread) for one of `OwnThreads.width` slots, so that a
/// suite of many blocking tests does not start them all at once on a two-core machine.
/// `.onOwnThreads(exclusive: true)` on a test takes every slot: no other case on its own
/// threads runs beside it (for a test that bounds the process's memory).
public struct OwnThreads: SuiteTrait, TestTrait, TestScoping {
    /// How many test cases run on their own threads at once, across all suites.
    public static let width = 6

    /// Whether a case of the test takes every slot.
    public let exclusive: Bool

    public var isRecursive: Bool { true }

    public init(exclusive: Bool = false) {
        self.exclusive = exclusive
    }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        // Around the suite as a whole (its tests' tasks then start on the executor, not on
        // the pool) and around each of its test cases (the slots).
        test.isSuite || testCase != nil ? self : nil
    }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
            // A suite, or a case already holding a slot (the trait on a suite and on one of
            // its tests): no slot, which could wait for the one the case holds.
            guard testCase != nil, !OwnThreads.inside else { return try await function() }
            // Waiting for a slot inside the preference: the case resumes on a thread of its
            // own, not behind the pool's queue.
            // The outermost of the test's own and its suite's traits takes the slots, as many
            // as any of them asks for.
            let exclusive = test.traits.contains { ($0 as? OwnThreads)?.exclusive == true }
            let slots = exclusive ? OwnThreads.width : 1
            await OwnThreads.gate.enter(slots)
            defer { OwnThreads.gate.leave(slots) }
            try await OwnThreads.$inside.withValue(true) { try await function() }
        }
    }

    @TaskLocal static var inside = false
    static let gate = AsyncGate(width: width)
}

extension Trait where Self == OwnThreads {
    /// Runs each test case on threads of its own, off the cooperative pool (see `OwnThreads`).
    public static var onOwnThreads: Self { OwnThreads() }

    /// `exclusive`: no other case on its own threads runs at the same time (see `OwnThreads`).
    public static func onOwnThreads(exclusive: Bool) -> Self { OwnThreads(exclusive: exclusive) }
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

/// At most `width` slots held at once; callers wait in arrival order (one asking for many
/// slots is not overtaken), suspended, holding no thread.
final class AsyncGate: Sendable {
    private struct State {
        var free: Int
        var waiters: [(slots: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state: Locked<State>

    init(width: Int) {
        state = Locked(State(free: width))
    }

    func enter(_ slots: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                if state.waiters.isEmpty && state.free >= slots {
                    state.free -= slots
                    return true
                }
                state.waiters.append((slots, continuation))
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    func leave(_ slots: Int) {
        let admitted = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.free += slots
            var admitted: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiters.first, first.slots <= state.free {
                state.free -= first.slots
                admitted.append(state.waiters.removeFirst().continuation)
            }
            return admitted
        }
        for continuation in admitted { continuation.resume() }
    }
}
