import AGEventLoop
import AGFormats
import AGHTTP

/// One worker's access log lines, written in batches: at 32 KiB, or 100 ms after the first
/// unwritten line (nginx's `access_log … buffer= flush=`), instead of one write(2) per request.
/// Lines are written as bytes into one reused buffer, from constant fragments and the values:
/// no allocation per line. Loop thread only; `flush()` on shutdown.
final class AccessLogBuffer: AccessLogSink {
    private let sink: Logger
    private var pending: [UInt8] = []
    /// The calendar part of the lines' `ts`, formatted once per second.
    private var clock = RFC3339Clock()
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

    /// The per-request line, from constant fragments (no key is written or measured per line):
    /// the object `JSONObjectWriter` would spell field by field (the router harness's
    /// `RecordingAccessLog` does, and a test compares the two).
    func appendAccess(_ line: AccessLine) {
        Self.write(line, clock: &clock, to: &pending)
        pending.append(UInt8(ascii: "\n"))
        if pending.count >= Self.flushBytes {
            flush()
        } else if !timerArmed {
            timerArmed = true
            timer?.arm(after: .milliseconds(100))
        }
    }

    static func write(_ line: AccessLine, clock: inout RFC3339Clock, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: Fragment.time)
        clock.append(unixMilliseconds: line.unixMilliseconds, to: &bytes)
        bytes.append(contentsOf: Fragment.requestID)
        JSONBytes.appendString(line.requestID, to: &bytes)
        bytes.append(contentsOf: Fragment.method)
        JSONBytes.appendString(line.method, to: &bytes)
        bytes.append(contentsOf: Fragment.path)
        JSONBytes.appendString(line.path, to: &bytes)
        bytes.append(contentsOf: Fragment.tenant)
        JSONBytes.appendString(line.tenant, to: &bytes)
        bytes.append(contentsOf: Fragment.route)
        JSONBytes.appendString(line.route, to: &bytes)
        bytes.append(contentsOf: Fragment.status)
        JSONBytes.appendInt(line.status, to: &bytes)
        if let code = line.code {
            bytes.append(contentsOf: Fragment.code)
            JSONBytes.appendString(code, to: &bytes)
        }
        bytes.append(contentsOf: Fragment.duration)
        JSONBytes.appendThousandths(line.durationMicroseconds, to: &bytes)
        if let upstream = line.upstreamMicroseconds {
            bytes.append(contentsOf: Fragment.upstream)
            JSONBytes.appendThousandths(upstream, to: &bytes)
        }
        bytes.append(contentsOf: Fragment.client)
        JSONBytes.appendString(line.client, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Everything between the values, in `AccessLine`'s order.
    private enum Fragment {
        static let time = Array(#"{"ts":""#.utf8)
        static let requestID = Array(#"","type":"access","requestId":"#.utf8)
        static let method = Array(#","method":"#.utf8)
        static let path = Array(#","path":"#.utf8)
        static let tenant = Array(#","tenant":"#.utf8)
        static let route = Array(#","route":"#.utf8)
        static let status = Array(#","status":"#.utf8)
        static let code = Array(#","code":"#.utf8)
        static let duration = Array(#","durationMs":"#.utf8)
        static let upstream = Array(#","upstreamMs":"#.utf8)
        static let client = Array(#","client":"#.utf8)
    }

    func flush() {
        guard !pending.isEmpty else { return }
        sink.writeLine(String(decoding: pending, as: UTF8.self))
        pending.removeAll(keepingCapacity: true)
    }
}
