import AGTestSupport
import Foundation
import Testing

/// The test plumbing's `.onOwnThreads`: its cases run off the cooperative pool, so more of
/// them can block at once than the pool has threads (two on a two-core machine).
@Suite("test plumbing: cases on their own threads", .onOwnThreads)
struct OwnThreadsTests {
    static let cases = 3
    static let arrivals = DispatchSemaphore(value: 0)
    static let everyoneArrived = DispatchSemaphore(value: 0)

    /// Each case blocks its thread until all three have started: on a two-thread pool the
    /// third would never start while the first two block.
    @Test(arguments: 0..<cases)
    func moreCasesBlockAtOnceThanThePoolHasThreads(_ index: Int) {
        Self.arrivals.signal()
        if index == 0 {
            var arrived = 0
            while arrived < Self.cases, Self.arrivals.wait(timeout: .now() + 60) == .success { arrived += 1 }
            #expect(arrived == Self.cases, "only \(arrived) of \(Self.cases) cases ran at once")
            for _ in 1..<Self.cases { Self.everyoneArrived.signal() }
        } else {
            #expect(Self.everyoneArrived.wait(timeout: .now() + 90) == .success)
        }
    }
}
