#if canImport(Glibc)
import Glibc
#endif
import AGEventLoop
import AGSync
import AGTestSupport
import Foundation
import Testing

/// The loop's cross-thread door, `execute`.
@Suite struct EventLoopWakeTests {
    /// Work from many threads at once, all of it run once, in each thread's order, on the loop
    /// thread: wake-ups that coincide are one wake-up, and none is lost. (The guard for the
    /// day the loop is woken some other way than `event_active` under libevent's lock.)
    @Test func workFromManyThreadsRunsOnceInOrder() async throws {
        await TestEventLoop.with { testLoop in
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
}
