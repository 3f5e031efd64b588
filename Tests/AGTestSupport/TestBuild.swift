import Foundation

/// What kind of build the suite runs on: `scripts/test --sanitize=<name>` exports
/// `AG_TEST_SANITIZER=<name>` (`address` or `thread`); a normal run has none.
///
/// Only two things may depend on it, both stated where used: how long a test waits for an
/// outcome that a slower build reaches later (never whether it is reached), and what a
/// process-memory figure is compared with, because a sanitizer's own bookkeeping (ASan's
/// quarantine and shadow, TSan's shadow) is resident memory too.
public enum TestBuild {
    /// `address`, `thread`, or `nil` on a normal build.
    public static let sanitizer: String? = {
        let value = ProcessInfo.processInfo.environment["AG_TEST_SANITIZER"] ?? ""
        return value.isEmpty ? nil : value
    }()

    /// `window` on a normal build, `window * factor` under a sanitizer (instrumented code runs
    /// several times slower, more so on the loaded 2-core machine).
    public static func waitWindow(_ window: Duration, sanitizerFactor factor: Int = 4) -> Duration {
        sanitizer == nil ? window : window * factor
    }

    /// Resident memory a sanitizer adds on top of a bounded process's own growth, measured
    /// (docs/security.md, "Fuzzing and sanitizer runs"): 0 on a normal build. Under ASan the
    /// measured child runs with a 1 MiB quarantine (`memoryMeasurementEnvironment`) and the
    /// rest is shadow memory and the allocator's per-size-class regions (measured growth of
    /// the pipelining gateway: 9–12 MB). TSan keeps shadow memory for every word the process
    /// touched; its figure is an estimate: the bounded-memory tests pass under TSan with it
    /// (whole TSan run, branch `tsan`), but the growth itself was not recorded.
    public static var residentAllowance: Int {
        switch sanitizer {
        case "address": 16 << 20
        case "thread": 32 << 20
        default: 0
        }
    }

    /// Extra environment for a child process whose resident memory a test compares with a
    /// bound: under ASan a 1 MiB quarantine (the default, 256 MiB, keeps that much freed memory
    /// resident by design). Empty on other builds; other children keep the full quarantine.
    public static var memoryMeasurementEnvironment: [String: String] {
        guard sanitizer == "address" else { return [:] }
        let inherited = ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + " " } ?? ""
        return ["ASAN_OPTIONS": inherited + "quarantine_size_mb=1 thread_local_quarantine_size_kb=64"]
    }

    /// Bytes the sanitizer's allocator holds for live allocations (quarantined frees excluded),
    /// from `__sanitizer_get_current_allocated_bytes`; nil on a normal build, where the symbol
    /// does not exist. An in-process memory bound under ASan compares this instead of RSS: the
    /// test process keeps the full quarantine, whose freed blocks are resident but not live.
    public static func liveHeapBytes() -> Int? {
        guard sanitizer != nil, let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__sanitizer_get_current_allocated_bytes") else {
            return nil
        }
        typealias Counter = @convention(c) () -> Int
        return unsafeBitCast(symbol, to: Counter.self)()
    }
}
