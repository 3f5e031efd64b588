import AGEventLoop
import AGFormats
import AGHTTP

/// One worker's access log lines, written in batches: at 32 KiB, or 100 ms after the first
/// unwritten line (nginx's `access_log … buffer= flush=`), instead of one write(2) per request.
/// Lines are written as bytes into one reused buffer, from constant fragments and the values:
/// no allocation per line. The buffer is an `HTTPHeadWriter` (an owned byte buffer: each
/// append is a bounds check and a memcpy), not a `[UInt8]`, whose appends cost ~100
/// instructions each, sixteen of them per line. Loop thread only; `flush()` on shutdown.
final class AccessLogBuffer: AccessLogSink {
    private let sink: Logger
    private var pending = HTTPHeadWriter(capacity: 2 * AccessLogBuffer.flushBytes)
    /// Values that need escaping are spelled here first by `JSONBytes`.
    private var scratch: [UInt8] = []
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
        Self.write(line, clock: &clock, scratch: &scratch, to: &pending)
        pending.append(byte: UInt8(ascii: "\n"))
        if pending.count >= Self.flushBytes {
            flush()
        } else if !timerArmed {
            timerArmed = true
            timer?.arm(after: .milliseconds(100))
        }
    }

    /// The line (without its newline) appended to `bytes`, as `appendAccess` writes it (for the
    /// test that compares it with `JSONObjectWriter`'s spelling).
    static func write(_ line: AccessLine, clock: inout RFC3339Clock, to bytes: inout [UInt8]) {
        var writer = HTTPHeadWriter(capacity: 256)
        var scratch: [UInt8] = []
        write(line, clock: &clock, scratch: &scratch, to: &writer)
        writer.appendBytes(to: &bytes)
    }

    static func write(_ line: AccessLine, clock: inout RFC3339Clock, scratch: inout [UInt8], to writer: inout HTTPHeadWriter) {
        writer.append(Fragment.time)
        let (second, millisecond) = clock.parts(unixMilliseconds: line.unixMilliseconds)
        writer.append(second[...])
        writer.append(byte: UInt8(ascii: "."))
        if millisecond < 100 { writer.append(byte: UInt8(ascii: "0")) }
        if millisecond < 10 { writer.append(byte: UInt8(ascii: "0")) }
        writer.append(decimal: millisecond)
        writer.append(byte: UInt8(ascii: "Z"))
        writer.append(Fragment.requestID)
        assert(JSONBytes.needsNoEscaping(line.requestID.description), "an access-log request id that needs escaping")
        writer.append(byte: UInt8(ascii: "\""))
        line.requestID.withUTF8 { writer.append($0) }
        writer.append(byte: UInt8(ascii: "\""))
        writer.append(Fragment.method)
        appendClean(line.method, to: &writer)
        writer.append(Fragment.path)
        // The one value a client chooses freely: quoted and copied when nothing in it needs
        // escaping (nearly always), else spelled by `JSONBytes` first.
        if JSONBytes.needsNoEscaping(line.path) {
            writer.append(byte: UInt8(ascii: "\""))
            writer.append(line.path)
            writer.append(byte: UInt8(ascii: "\""))
        } else {
            scratch.removeAll(keepingCapacity: true)
            JSONBytes.appendString(line.path, to: &scratch)
            writer.append(scratch[...])
        }
        writer.append(Fragment.tenant)
        appendClean(line.tenant, to: &writer)
        writer.append(Fragment.route)
        appendClean(line.route, to: &writer)
        writer.append(Fragment.status)
        writer.append(decimal: line.status)
        if let code = line.code {
            writer.append(Fragment.code)
            appendClean(code, to: &writer)
        }
        writer.append(Fragment.duration)
        appendThousandths(line.durationMicroseconds, scratch: &scratch, to: &writer)
        if let upstream = line.upstreamMicroseconds {
            writer.append(Fragment.upstream)
            appendThousandths(upstream, scratch: &scratch, to: &writer)
        }
        writer.append(Fragment.client)
        appendClean(line.client, to: &writer)
        writer.append(byte: UInt8(ascii: "}"))
    }

    /// A value that needs no JSON escaping by construction, quoted and copied without the
    /// byte scan (~100 instructions a value, six per line): request ids are
    /// `RequestID.isSane`'s `[A-Za-z0-9._:-]` or a fresh UUID; methods are token characters
    /// (the parser refuses anything else); App IDs passed the config's team-ID and bundle-ID
    /// checks; routes and error codes are the gateway's own constants; the client is an
    /// address the gateway formatted. Only the path, the one value a client chooses freely,
    /// is scanned, and spelled by `JSONBytes` when it needs escaping. Debug builds (every test
    /// run) check the claim.
    private static func appendClean(_ text: String, to writer: inout HTTPHeadWriter) {
        assert(JSONBytes.needsNoEscaping(text), "an access-log value that needs escaping: \(text)")
        writer.append(byte: UInt8(ascii: "\""))
        writer.append(text)
        writer.append(byte: UInt8(ascii: "\""))
    }

    /// `value / 1000` as `JSONBytes.appendThousandths` spells it (`12.5`, `0.001`, `3.0`),
    /// written straight into the line; beyond 10¹⁸ (never a real duration) by `JSONBytes`.
    private static func appendThousandths(_ value: Int, scratch: inout [UInt8], to writer: inout HTTPHeadWriter) {
        guard value.magnitude < 1_000_000_000_000_000 else {
            scratch.removeAll(keepingCapacity: true)
            JSONBytes.appendThousandths(value, to: &scratch)
            return writer.append(scratch[...])
        }
        if value < 0 { writer.append(byte: UInt8(ascii: "-")) }
        let magnitude = Int(value.magnitude)
        writer.append(decimal: magnitude / 1000)
        writer.append(byte: UInt8(ascii: "."))
        // The fraction's digits without its trailing zeros, at least one.
        var fraction = magnitude % 1000
        var digits = 3
        while digits > 1, fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        if digits >= 2, fraction < (digits == 3 ? 100 : 10) { writer.append(byte: UInt8(ascii: "0")) }
        if digits == 3, fraction < 10 { writer.append(byte: UInt8(ascii: "0")) }
        writer.append(decimal: fraction)
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
    }

    func flush() {
        guard pending.count > 0 else { return }
        pending.withUnsafeBytes { sink.write($0) }
        pending.reset()
    }
}
