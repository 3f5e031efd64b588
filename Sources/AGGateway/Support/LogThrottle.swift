import AGEventLoop
import AGPolicy
import AGSync

/// Rate-limits a repeated log line per key, so an outage writes a handful of lines with counts
/// instead of one per request (one Redis outage once wrote 35,093 "state store failed" lines).
///
/// Per key: the first line goes out at once; later ones within `interval` of the last line
/// written are held back and counted; the next line after `interval` carries `suppressed: N`.
/// `flush()` (called periodically) writes one summary line for a key whose last lines were held
/// back and whose interval has passed, so the count of the tail of an outage is never lost.
/// Shared by every worker of an instance; the mutex is taken only on logging paths.
final class LogThrottle: Sendable {
    /// A line to write now.
    struct Line {
        let level: Logger.Level
        let message: String
        let fields: [(String, LogValue)]
    }

    private struct Entry {
        var lastWrittenMicroseconds: Int64
        /// Lines held back since the last one written, and the most recent of them.
        var suppressed: Int
        var latest: Line?
    }

    let interval: Duration
    private let time: any TimeSource
    private let entries = Locked<[String: Entry]>([:])

    init(interval: Duration = .seconds(10), time: any TimeSource) {
        self.interval = interval
        self.time = time
    }

    private var intervalMicroseconds: Int64 {
        let (seconds, attoseconds) = interval.components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// The line to write for this occurrence of `key`, or nil when it is held back.
    func admit(key: String, _ line: Line) -> Line? {
        let now = time.nowMicroseconds
        let window = intervalMicroseconds
        return entries.withLock { entries -> Line? in
            guard var entry = entries[key] else {
                entries[key] = Entry(lastWrittenMicroseconds: now, suppressed: 0, latest: nil)
                return line
            }
            // A clock that went backwards (re-aligned on Redis) opens the window too.
            guard now - entry.lastWrittenMicroseconds >= window || now < entry.lastWrittenMicroseconds else {
                entry.suppressed += 1
                entry.latest = line
                entries[key] = entry
                return nil
            }
            let suppressed = entry.suppressed
            entries[key] = Entry(lastWrittenMicroseconds: now, suppressed: 0, latest: nil)
            return suppressed > 0 ? Self.counted(line, suppressed) : line
        }
    }

    /// Summary lines for keys with held-back lines whose interval has passed (every key with
    /// held-back lines when `everything`, at shutdown); forgets keys that have been quiet for a
    /// whole interval, so the table stays as small as the set of ongoing troubles.
    func flush(everything: Bool = false) -> [Line] {
        let now = time.nowMicroseconds
        let window = intervalMicroseconds
        return entries.withLock { entries -> [Line] in
            var lines: [Line] = []
            for (key, entry) in entries where everything || now - entry.lastWrittenMicroseconds >= window {
                if let latest = entry.latest, entry.suppressed > 0 {
                    lines.append(Self.counted(latest, entry.suppressed))
                    entries[key] = Entry(lastWrittenMicroseconds: now, suppressed: 0, latest: nil)
                } else {
                    entries[key] = nil
                }
            }
            return lines
        }
    }

    private static func counted(_ line: Line, _ suppressed: Int) -> Line {
        Line(level: line.level, message: line.message, fields: line.fields + [("suppressed", .int(suppressed))])
    }
}

/// A log sink whose `logRepeated` lines go through a `LogThrottle`; every other line is
/// written as is.
struct ThrottledLogSink: LogSink {
    let base: any LogSink
    let throttle: LogThrottle

    func log(_ level: Logger.Level, _ message: String, _ fields: [(String, LogValue)]) {
        base.log(level, message, fields)
    }

    func logRepeated(_ level: Logger.Level, _ message: String, key: String, _ fields: [(String, LogValue)]) {
        guard let line = throttle.admit(key: key, LogThrottle.Line(level: level, message: message, fields: fields)) else {
            return
        }
        base.log(line.level, line.message, line.fields)
    }

    /// Writes the throttle's pending summary lines (called from a timer, and at shutdown with
    /// `everything`).
    func flush(everything: Bool = false) {
        for line in throttle.flush(everything: everything) { base.log(line.level, line.message, line.fields) }
    }
}

/// Writes a `ThrottledLogSink`'s summary lines every interval, on the control loop.
final class LogThrottleFlusher {
    private let sink: ThrottledLogSink
    private var timer: EventTimer?

    init(loop: EventLoop, sink: ThrottledLogSink) {
        self.sink = sink
        let interval = sink.throttle.interval
        let timer = EventTimer(loop: loop) { [unowned self] in
            self.sink.flush()
            self.timer?.arm(after: interval)
        }
        timer.arm(after: interval)
        self.timer = timer
    }

    /// Writes what is pending and stops; must run on the loop before it stops.
    func close() {
        timer?.cancel()
        timer = nil
        sink.flush(everything: true)
    }
}
