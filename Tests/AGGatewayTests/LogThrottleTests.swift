import AGTestSupport
import AGSync
import Testing

@testable import AGGateway

/// `LogThrottle` on a controlled clock: first line at once, then one per interval per key
/// with the count of what it held back, and a flush that never loses the tail's count.
@Suite struct LogThrottleTests {
    /// A sink that keeps every line written.
    final class RecordingSink: LogSink {
        let lines = Locked<[(Logger.Level, String, [String: String])]>([])

        func log(_ level: Logger.Level, _ message: String, _ fields: [(String, LogValue)]) {
            lines.withLock { $0.append((level, message, Dictionary(fields.map { ($0.0, $0.1.text) }) { $1 })) }
        }

        var written: [(Logger.Level, String, [String: String])] { lines.withLock { $0 } }
    }

    let time = ManualTime(microseconds: 1_700_000_000_000_000)
    let sink = RecordingSink()
    var throttled: ThrottledLogSink { ThrottledLogSink(base: sink, throttle: throttle) }
    let throttle: LogThrottle

    init() {
        throttle = LogThrottle(interval: .seconds(10), time: time)
    }

    func fail(_ sink: ThrottledLogSink, _ n: Int, route: String = "refresh") {
        for i in 0..<n {
            sink.logRepeated(.warn, "state store failed", key: "store/" + route, [("route", .string(route)), ("attempt", .int(i))])
        }
    }

    @Test func firstLineAtOnceThenOnePerIntervalWithTheCount() {
        let sink = throttled
        fail(sink, 1000)
        #expect(self.sink.written.count == 1)
        #expect(self.sink.written[0].2["suppressed"] == nil)
        #expect(self.sink.written[0].2["attempt"] == "0")
        time.advance(.milliseconds(9_999))
        fail(sink, 1)
        #expect(self.sink.written.count == 1, "still inside the interval")
        time.advance(.milliseconds(1))
        fail(sink, 1)
        #expect(self.sink.written.count == 2)
        #expect(self.sink.written[1].2["suppressed"] == "1000")
        #expect(self.sink.written[1].0 == .warn)
        #expect(self.sink.written[1].1 == "state store failed")
    }

    @Test func keysAreIndependentAndOtherLinesAreNeverThrottled() {
        let sink = throttled
        fail(sink, 5, route: "refresh")
        fail(sink, 5, route: "challenge")
        for _ in 0..<5 { sink.warn("configuration reloaded") }
        #expect(self.sink.written.count == 2 + 5)
    }

    @Test func flushWritesTheTailCountOnceItsIntervalPassed() {
        let sink = throttled
        fail(sink, 50)
        sink.flush()
        #expect(self.sink.written.count == 1, "the interval has not passed")
        time.advance(.seconds(10))
        sink.flush()
        #expect(self.sink.written.count == 2)
        #expect(self.sink.written[1].2["suppressed"] == "49")
        #expect(self.sink.written[1].2["attempt"] == "49", "the summary carries the latest held-back line's fields")
        // Nothing new: the next flush writes nothing, and a quiet interval forgets the key, so
        // the next trouble is written at once again.
        time.advance(.seconds(10))
        sink.flush()
        #expect(self.sink.written.count == 2)
        time.advance(.seconds(1))
        fail(sink, 1)
        #expect(self.sink.written.count == 3)
        #expect(self.sink.written[2].2["suppressed"] == nil)
    }

    @Test func shutdownFlushWritesEverythingHeldBack() {
        let sink = throttled
        fail(sink, 3)
        sink.flush(everything: true)
        #expect(self.sink.written.count == 2)
        #expect(self.sink.written[1].2["suppressed"] == "2")
    }

    @Test func aClockThatJumpsBackOpensTheWindow() {
        let sink = throttled
        fail(sink, 2)
        time.advance(.seconds(-60))
        fail(sink, 1)
        #expect(self.sink.written.count == 2)
        #expect(self.sink.written[1].2["suppressed"] == "1")
    }

    @Test func aSinkWithoutThrottleWritesEveryRepeatedLine() {
        for _ in 0..<3 { sink.logRepeated(.warn, "state store failed", key: "k", []) }
        #expect(sink.written.count == 3)
    }
}
