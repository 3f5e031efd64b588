import AGEventLoop
import AGFormats
import AGHTTP

/// One worker's access log lines, written in batches: at 32 KiB, or 100 ms after the first
/// unwritten line (nginx's `access_log … buffer= flush=`), instead of one write(2) per request.
/// Lines are written as bytes into one reused buffer, with one reused JSON writer: no
/// allocation per line. Loop thread only; `flush()` on shutdown.
final class AccessLogBuffer: AccessLogSink {
    private let sink: Logger
    private var pending: [UInt8] = []
    private var line = JSONObjectWriter()
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

    func appendLine(_ write: (inout JSONObjectWriter) -> Void) {
        line.reset()
        write(&line)
        line.finish(appendingTo: &pending)
        pending.append(UInt8(ascii: "\n"))
        if pending.count >= Self.flushBytes {
            flush()
        } else if !timerArmed {
            timerArmed = true
            timer?.arm(after: .milliseconds(100))
        }
    }

    func flush() {
        guard !pending.isEmpty else { return }
        sink.writeLine(String(decoding: pending, as: UTF8.self))
        pending.removeAll(keepingCapacity: true)
    }
}
