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

/// `eventually` for async conditions.
public func eventually(_ seconds: Double = 5, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(sanitizerWindow(seconds))
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// `seconds`, times 4 under a sanitizer (`TestBuild.waitWindow`'s factor): how long to wait for
/// an outcome the instrumented build reaches later, never whether it is reached.
func sanitizerWindow(_ seconds: Double) -> Double {
    TestBuild.sanitizer == nil ? seconds : seconds * 4
}
