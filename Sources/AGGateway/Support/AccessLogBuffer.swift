import AGEventLoop
import AGFormats
import AGHTTP

/// One worker's access log lines, written in batches: at 32 KiB, or 100 ms after the first
/// unwritten line (nginx's `access_log … buffer= flush=`), instead of one write(2) per request.
/// Lines are written as bytes into one reused buffer, from constant fragments and the values:
/// no allocation per line. The buffer is an `HTTPHeadWriter` (an owned byte buffer, not a
/// `[UInt8]`, whose appends cost ~100 instructions each); a line reserves its room once and
/// is stored piece by piece without further checks (`write`). Loop thread only; `flush()` on
/// shutdown.
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
        let (second, millisecond) = clock.parts(unixMilliseconds: line.unixMilliseconds)
        // The one value a client chooses freely: quoted and copied when nothing in it needs
        // escaping (nearly always), else spelled (quotes included) by `JSONBytes` first.
        let pathIsClean = JSONBytes.needsNoEscaping(line.path)
        if !pathIsClean {
            scratch.removeAll(keepingCapacity: true)
            JSONBytes.appendString(line.path, to: &scratch)
        }
        let duration = Thousandths(line.durationMicroseconds)
        let upstream = line.upstreamMicroseconds.map(Thousandths.init)
        // The room the line can take: the fragments, quotes and punctuation, the milliseconds
        // and the status within `fixedRoom`, the values by their byte counts.
        let room = Self.fixedRoom + second.count + line.requestID.utf8Count + line.method.utf8.count
            + (pathIsClean ? line.path.utf8.count : scratch.count) + line.tenant.utf8.count + line.route.utf8.count
            + (line.code?.utf8.count ?? 0) + line.client.utf8.count + duration.room + (upstream?.room ?? 0)
        // One capacity check for the line, then plain stores: through the writer's checked
        // appends (a call and a check each, some thirty per line) the line cost ~2.4 k
        // instructions per proxied request.
        writer.appendWriting(upTo: room) { out in
            out.put(Fragment.time)
            out.put(second)
            out.put(UInt8(ascii: "."))
            if millisecond < 100 { out.put(UInt8(ascii: "0")) }
            if millisecond < 10 { out.put(UInt8(ascii: "0")) }
            out.putDecimal(millisecond)
            out.put(UInt8(ascii: "Z"))
            out.put(Fragment.requestID)
            assert(JSONBytes.needsNoEscaping(line.requestID.description), "an access-log request id that needs escaping")
            out.put(UInt8(ascii: "\""))
            line.requestID.write(to: &out)
            out.put(UInt8(ascii: "\""))
            out.put(Fragment.method)
            putClean(line.method, &out)
            out.put(Fragment.path)
            if pathIsClean {
                out.put(UInt8(ascii: "\""))
                out.put(line.path)
                out.put(UInt8(ascii: "\""))
            } else {
                out.put(scratch)
            }
            out.put(Fragment.tenant)
            putClean(line.tenant, &out)
            out.put(Fragment.route)
            putClean(line.route, &out)
            out.put(Fragment.status)
            out.putDecimal(line.status)
            if let code = line.code {
                out.put(Fragment.code)
                putClean(code, &out)
            }
            out.put(Fragment.duration)
            duration.write(to: &out)
            if let upstream {
                out.put(Fragment.upstream)
                upstream.write(to: &out)
            }
            out.put(Fragment.client)
            putClean(line.client, &out)
            out.put(UInt8(ascii: "}"))
        }
    }

    /// Room for everything in a line but its values: the fragments (~140 bytes), seven pairs of
    /// quotes, the time's `.`, three digits and `Z`, the status (at most 20 bytes), the `}`, and
    /// the four bytes past a generated request id that its last word's store touches.
    private static let fixedRoom = 256

    /// A value that needs no JSON escaping by construction, quoted and copied without the
    /// byte scan (~100 instructions a value, six per line): request ids are
    /// `RequestID.isSane`'s `[A-Za-z0-9._:-]` or a fresh UUID; methods are token characters
    /// (the parser refuses anything else); App IDs passed the config's team-ID and bundle-ID
    /// checks; routes and error codes are the gateway's own constants; the client is an
    /// address the gateway formatted. Only the path, the one value a client chooses freely,
    /// is scanned. Debug builds (every test run) check the claim.
    private static func putClean(_ text: String, _ out: inout ByteCursor) {
        assert(JSONBytes.needsNoEscaping(text), "an access-log value that needs escaping: \(text)")
        out.put(UInt8(ascii: "\""))
        out.put(text)
        out.put(UInt8(ascii: "\""))
    }

    /// `value / 1000` as `JSONBytes.appendThousandths` spells it (`12.5`, `0.001`, `3.0`):
    /// written straight into the line; beyond 10¹⁸ (never a real duration) spelled by
    /// `JSONBytes` beforehand.
    private struct Thousandths {
        let value: Int
        /// `JSONBytes`' spelling of a value too large for the digits below.
        let spelled: [UInt8]?

        init(_ value: Int) {
            self.value = value
            if value.magnitude < 1_000_000_000_000_000 {
                spelled = nil
            } else {
                var bytes: [UInt8] = []
                JSONBytes.appendThousandths(value, to: &bytes)
                spelled = bytes
            }
        }

        /// The most bytes `write` writes: a sign, up to 15 digits, `.`, three digits.
        var room: Int { spelled?.count ?? 20 }

        func write(to out: inout ByteCursor) {
            if let spelled { return out.put(spelled) }
            if value < 0 { out.put(UInt8(ascii: "-")) }
            let magnitude = Int(value.magnitude)
            out.putDecimal(magnitude / 1000)
            out.put(UInt8(ascii: "."))
            // The fraction's digits without its trailing zeros, at least one.
            var fraction = magnitude % 1000
            var digits = 3
            while digits > 1, fraction % 10 == 0 {
                fraction /= 10
                digits -= 1
            }
            if digits >= 2, fraction < (digits == 3 ? 100 : 10) { out.put(UInt8(ascii: "0")) }
            if digits == 3, fraction < 10 { out.put(UInt8(ascii: "0")) }
            out.putDecimal(fraction)
        }
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
