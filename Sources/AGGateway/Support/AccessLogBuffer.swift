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
        Fragment.append(Fragment.time, to: &bytes)
        clock.append(unixMilliseconds: line.unixMilliseconds, to: &bytes)
        Fragment.append(Fragment.requestID, to: &bytes)
        JSONBytes.appendString(line.requestID, to: &bytes)
        Fragment.append(Fragment.method, to: &bytes)
        JSONBytes.appendString(line.method, to: &bytes)
        Fragment.append(Fragment.path, to: &bytes)
        JSONBytes.appendString(line.path, to: &bytes)
        Fragment.append(Fragment.tenant, to: &bytes)
        JSONBytes.appendString(line.tenant, to: &bytes)
        Fragment.append(Fragment.route, to: &bytes)
        JSONBytes.appendString(line.route, to: &bytes)
        Fragment.append(Fragment.status, to: &bytes)
        JSONBytes.appendInt(line.status, to: &bytes)
        if let code = line.code {
            Fragment.append(Fragment.code, to: &bytes)
            JSONBytes.appendString(code, to: &bytes)
        }
        Fragment.append(Fragment.duration, to: &bytes)
        JSONBytes.appendThousandths(line.durationMicroseconds, to: &bytes)
        if let upstream = line.upstreamMicroseconds {
            Fragment.append(Fragment.upstream, to: &bytes)
            JSONBytes.appendThousandths(upstream, to: &bytes)
        }
        Fragment.append(Fragment.client, to: &bytes)
        JSONBytes.appendString(line.client, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Everything between the values, in `AccessLine`'s order: static strings, appended from
    /// the binary's constant data (a static array would be retained, released and checked
    /// for initialization on each of a line's ten appends).
    private enum Fragment {
        static var time: StaticString { #"{"ts":""# }
        static var requestID: StaticString { #"","type":"access","requestId":"# }
        static var method: StaticString { #","method":"# }
        static var path: StaticString { #","path":"# }
        static var tenant: StaticString { #","tenant":"# }
        static var route: StaticString { #","route":"# }
        static var status: StaticString { #","status":"# }
        static var code: StaticString { #","code":"# }
        static var duration: StaticString { #","durationMs":"# }
        static var upstream: StaticString { #","upstreamMs":"# }
        static var client: StaticString { #","client":"# }

        @inline(__always)
        static func append(_ fragment: StaticString, to bytes: inout [UInt8]) {
            fragment.withUTF8Buffer { bytes.append(contentsOf: $0) }
        }
    }

    func flush() {
        guard !pending.isEmpty else { return }
        sink.writeLine(String(decoding: pending, as: UTF8.self))
        pending.removeAll(keepingCapacity: true)
    }
}
