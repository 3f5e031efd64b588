#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Polls `condition` every 20 ms until it holds or `seconds` pass; the suite's one way to wait
/// for something another thread or process does (a reload, a subscription, a log line). Waits
/// for time itself to pass use `ManualTime` instead.
public func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(sanitizerWindow(seconds))
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// `eventually` for async conditions (`poll` every 20 ms).
public func eventually(_ seconds: Double = 5, _ condition: () async throws -> Bool) async rethrows -> Bool {
    try await poll(within: .milliseconds(Int(sanitizerWindow(seconds) * 1000)), every: .milliseconds(20), condition)
}

/// `seconds`, times 4 under a sanitizer (`TestBuild.waitWindow`'s factor): how long to wait for
/// an outcome the instrumented build reaches later, never whether it is reached.
func sanitizerWindow(_ seconds: Double) -> Double {
    TestBuild.sanitizer == nil ? seconds : seconds * 4
}

/// Runs `look` every `interval` until it returns true, or until a look that began after `limit`
/// returned false; returns whether it held. Every deadline-bound polling loop of the async tests
/// goes through here (`eventually` included): the test task runs on the cooperative pool (two threads on a two-core
/// machine, shared with tests that block theirs), so it can wake from a sleep long past its
/// deadline — a loop that then gave up without a last look failed on a condition that had held
/// for seconds (`RedisClusterTests`' subscriber, three times in CI and sanitizer runs).
public func poll(within limit: Duration, every interval: Duration = .milliseconds(10),
                 _ look: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + limit
    while true {
        let late = ContinuousClock.now >= deadline
        if try await look() { return true }
        if late { return false }
        try? await Task.sleep(for: interval)
    }
}
