internal import CEvent
import AGSync

/// Routes libevent's own log messages to the gateway's logger, rate-limited: at most one line
/// per severity per interval, carrying how many were dropped since the last one. Without
/// it, libevent writes each warning to stderr itself, which under a fault (an accept loop at
/// the descriptor limit) meant millions of identical lines.
public enum LibeventLog {
    /// `severity` is libevent's (0 debug … 3 error); `suppressed` counts the messages of that
    /// severity dropped since the previous line.
    public typealias Sink = @Sendable (_ severity: Int32, _ message: String, _ suppressed: Int) -> Void

    private struct State {
        var sink: Sink?
        var interval: Duration = .seconds(10)
        var last: [Int32: ContinuousClock.Instant] = [:]
        var suppressed: [Int32: Int] = [:]
    }

    private static let state = Locked(State())

    /// Installs `sink` for the whole process (libevent has one log callback).
    public static func install(interval: Duration = .seconds(10), _ sink: @escaping Sink) {
        state.withLock {
            $0.sink = sink
            $0.interval = interval
        }
        event_set_log_callback { severity, message in
            LibeventLog.log(severity, message.map { String(cString: $0) } ?? "")
        }
    }

    static func log(_ severity: Int32, _ message: String) {
        let now = ContinuousClock.now
        let delivery: (Sink, Int)? = state.withLock { state in
            guard let sink = state.sink else { return nil }
            if let last = state.last[severity], now - last < state.interval {
                state.suppressed[severity, default: 0] += 1
                return nil
            }
            state.last[severity] = now
            let dropped = state.suppressed[severity] ?? 0
            state.suppressed[severity] = 0
            return (sink, dropped)
        }
        if let (sink, dropped) = delivery { sink(severity, message, dropped) }
    }
}
