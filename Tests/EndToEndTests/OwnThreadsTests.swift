import AGTestSupport
import Foundation
import Testing

/// The test plumbing's `.onOwnThreads`: its tests run off the cooperative pool, so more of
/// their tasks can block at once than the pool has threads (two on a two-core machine).
@Suite("test plumbing: tests on their own threads", .onOwnThreads)
struct OwnThreadsTests {
    /// Three child tasks each block their thread until all three have started: on a
    /// two-thread pool the third would not start while the first two block.
    @Test func moreTasksBlockAtOnceThanThePoolHasThreads() async {
        let tasks = 3
        let arrivals = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let arrived = await withTaskGroup(of: Int.self) { group in
            for index in 0..<tasks {
                group.addTask {
                    arrivals.signal()
                    guard index == 0 else {
                        return release.wait(timeout: .now() + 60) == .success ? 0 : -1
                    }
                    var arrived = 0
                    while arrived < tasks, arrivals.wait(timeout: .now() + 30) == .success { arrived += 1 }
                    for _ in 1..<tasks { release.signal() }
                    return arrived
                }
            }
            return await group.reduce(0, +)
        }
        #expect(arrived == tasks, "only \(arrived) of \(tasks) tasks ran at once")
    }
}
