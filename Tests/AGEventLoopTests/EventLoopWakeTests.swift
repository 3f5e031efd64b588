#if canImport(Glibc)
import Glibc
#endif
@testable import AGEventLoop
import AGSync
import AGTestSupport
import Foundation
import Testing

/// The loop's cross-thread door (an eventfd, with libevent's own locking off) and its common
/// timeouts.
@Suite struct EventLoopWakeTests {
    /// Work from many threads at once, all of it run once, in each thread's order, on the loop
    /// thread: wake-ups that coincide are one wake-up, and none is lost.
    @Test func workFromManyThreadsRunsOnceInOrder() async throws {
        try await TestEventLoop.with { testLoop in
            let threads = 4
            let perThread = 2000
            let seen = Locked<[[Int]]>(Array(repeating: [], count: threads))
            let offLoop = Locked<Int>(0)
            let producers = (0..<threads).map { thread in
                Thread {
                    for item in 0..<perThread {
                        testLoop.loop.execute {
                            if !testLoop.inLoopThread { offLoop.withLock { $0 += 1 } }
                            seen.withLock { $0[thread].append(item) }
                        }
                        if item % 97 == 0 { usleep(50) }
                    }
                }
            }
            producers.forEach { $0.start() }
            #expect(await eventually(20) { seen.withLock { $0.map(\.count).reduce(0, +) } == threads * perThread })
            // Anything queued after that would show up as extra items.
            _ = await testLoop.submit { _ in 0 }
            let lists = seen.withLock { $0 }
            for list in lists { #expect(list == Array(0..<perThread)) }
            #expect(offLoop.withLock { $0 } == 0)
        }
    }

    /// One duration is one common timeout per loop (the same value every time, not the plain
    /// timeval); zero stays zero, which a bufferevent reads as no timeout.
    @Test func commonTimeoutsAreSharedPerDuration() async {
        await TestEventLoop.with { testLoop in
            let values = await testLoop.submit { loop -> [Int] in
                let first = loop.commonTimeout(timeval(tv_sec: 0, tv_usec: 250_000))
                let again = loop.commonTimeout(timeval(tv_sec: 0, tv_usec: 250_000))
                let other = loop.commonTimeout(timeval(tv_sec: 3, tv_usec: 0))
                let zero = loop.commonTimeout(timeval(tv_sec: 0, tv_usec: 0))
                return [first.tv_sec, first.tv_usec, again.tv_sec, again.tv_usec, other.tv_sec, other.tv_usec,
                        zero.tv_sec, zero.tv_usec]
            }
            #expect(values[0] == values[2] && values[1] == values[3], "the same common timeout")
            #expect(values[0] == 0 && values[1] != 250_000, "marked as common (libevent's magic in tv_usec)")
            #expect(values[1] & 0xFFFFF == 250_000, "the duration is kept in the low bits")
            #expect(values[4] == 3 && values[5] != 0 && values[5] != values[1])
            #expect(values[6] == 0 && values[7] == 0)
        }
    }
}
