import AGConfig
import AGPolicy
import AGEventLoop
import AGHTTP

/// One worker's access log lines, written in batches: at 32 KiB, or 100 ms after the first
/// unwritten line (nginx's `access_log … buffer= flush=`), instead of one write(2) per request.
/// Loop thread only; `flush()` on shutdown.
final class AccessLogBuffer: AccessLogSink {
    private let sink: Logger
    private var pending = ""
    private var timer: EventTimer?
    private var timerArmed = false
    static let flushBytes = 32 * 1024

    init(loop: EventLoop, sink: Logger) {
        self.sink = sink
        timer = EventTimer(loop: loop) { [unowned self] in
            timerArmed = false
            flush()
        }
    }

    func append(_ line: String) {
        pending += line
        pending += "\n"
        if pending.utf8.count >= Self.flushBytes {
            flush()
        } else if !timerArmed {
            timerArmed = true
            timer?.arm(after: .milliseconds(100))
        }
    }

    func flush() {
        guard !pending.isEmpty else { return }
        sink.writeLine(pending)
        pending.removeAll(keepingCapacity: true)
    }
}
