/// Writes one flat JSON object straight into bytes: the fast path for log lines, error
/// envelopes and small responses, where building a `JSONValue` tree first would only cost.
///
/// Values are escaped exactly as `JSONValue.serialized()` escapes them (one shared routine);
/// keys are trusted literals from our own code. Members keep the order they are added in.
/// A writer kept by its owner is `reset()` and reused, so its buffer is allocated once.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    private var first = true

    public init() {
        self.init(capacity: 256)
    }

    /// A writer with room for `capacity` bytes, for an object known to be larger (a token
    /// answer): its buffer then never grows. The buffer is reserved empty and then opened, so
    /// it is allocated once (a one-byte literal reserved afterwards was allocated twice).
    public init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Empties the object, keeping the buffer's capacity.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    public mutating func add(_ key: String, _ value: String) {
        addKey(key)
        JSONValue.writeString(value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: Substring) {
        addKey(key)
        JSONValue.writeString(value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        add(key, value)
    }

    public mutating func add(_ key: String, _ value: Int) {
        addKey(key)
        DecimalDigits.append(value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: Double) {
        addKey(key)
        JSONBytes.appendDouble(value, to: &bytes)
    }

    /// Adds `thousandths / 1000` as a JSON number, spelled exactly as `add(key, Double)` spells
    /// that double (`12.5`, `0.001`, `3.0`), without converting a double to text: durations in
    /// milliseconds with microsecond precision, as the access log writes them.
    public mutating func add(_ key: String, thousandths: Int) {
        addKey(key)
        JSONBytes.appendThousandths(thousandths, to: &bytes)
    }

    /// Adds a UTC time as an RFC 3339 string (`2026-12-01T09:00:00.123Z` with `fractional`).
    public mutating func add(_ key: String, _ time: UTCDateTime, fractional: Bool) {
        addKey(key)
        bytes.append(UInt8(ascii: "\""))
        time.writeISO8601(fractional: fractional, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func add(_ key: String, _ value: Bool) {
        addKey(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Adds an already-serialized JSON value.
    public mutating func add(_ key: String, rawJSON: String) {
        addKey(key)
        bytes.append(contentsOf: rawJSON.utf8)
    }

    /// Adds a `JSONValue` (an object or array member, say).
    public mutating func add(_ key: String, _ value: JSONValue) {
        addKey(key)
        value.write(to: &bytes)
    }

    /// The object's UTF-8 bytes: the writer's own buffer, closed in place when the writer is not
    /// used afterwards (a copy of the buffer when it is).
    public consuming func finishedBytes() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The object as text.
    public consuming func finished() -> String { String(decoding: finishedBytes(), as: UTF8.self) }

    /// Appends the finished object to `output` (a log buffer, say) without building a copy.
    public func finish(appendingTo output: inout [UInt8]) {
        output.append(contentsOf: bytes)
        output.append(UInt8(ascii: "}"))
    }

    private mutating func addKey(_ key: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        bytes.appendUTF8(of: key)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }
}

extension Array where Element == UInt8 {
    /// Appends the UTF-8 of `text` with one copy when the string's storage is contiguous (native
    /// strings and literals are); appending a `String.UTF8View` as a sequence goes byte by byte
    /// and cost several times more on the access-log path.
    @inlinable
    public mutating func appendUTF8(of text: some StringProtocol) {
        let copied = text.utf8.withContiguousStorageIfAvailable { append(contentsOf: $0) } != nil
        if !copied { append(contentsOf: text.utf8) }
    }
}

/// JSON values written straight into a byte buffer, for lines of a fixed shape whose keys are
/// constant fragments (the access log): each spelled exactly as `JSONObjectWriter` spells it.
public enum JSONBytes {
    /// A JSON string, quoted and escaped.
    public static func appendString(_ string: String, to bytes: inout [UInt8]) {
        JSONValue.writeString(string, to: &bytes)
    }

    public static func appendString(_ string: Substring, to bytes: inout [UInt8]) {
        JSONValue.writeString(string, to: &bytes)
    }

    /// True when `string` goes into a JSON string as it is (no `"`, `\` or control
    /// character): quoting it is then all `appendString` does.
    public static func needsNoEscaping(_ string: String) -> Bool {
        JSONValue.isClean(string.utf8.span)
    }

    public static func needsNoEscaping(_ string: Substring) -> Bool {
        JSONValue.isClean(string.utf8.span)
    }

    public static func appendInt(_ value: Int, to bytes: inout [UInt8]) {
        DecimalDigits.append(value, to: &bytes)
    }

    /// A double as Swift's description spells it; `null` for infinities and NaN.
    public static func appendDouble(_ value: Double, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
    }

    /// `thousandths / 1000` as the JSON number Swift's `Double` description spells (`12.5`,
    /// `0.001`, `3.0`), without converting a double to text.
    public static func appendThousandths(_ thousandths: Int, to bytes: inout [UInt8]) {
        guard thousandths.magnitude < 1_000_000_000_000_000 else {
            return appendDouble(Double(thousandths) / 1000, to: &bytes)
        }
        if thousandths < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = Int(thousandths.magnitude)
        DecimalDigits.append(magnitude / 1000, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        var fraction = magnitude % 1000
        if fraction == 0 { return bytes.append(UInt8(ascii: "0")) }
        var divisor = 100
        while fraction > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(fraction / divisor))
            fraction %= divisor
            divisor /= 10
        }
    }
}

/// RFC 3339 times with milliseconds (`2026-12-01T09:00:00.123Z`, as
/// `UTCDateTime.writeISO8601(fractional: true)` spells them), the calendar part remembered for
/// the last second asked: a log writes many lines per second.
public struct RFC3339Clock {
    private var cachedSecond = Int64.min
    private var secondText: [UInt8] = []

    public init() {}

    /// Appends the time, unquoted.
    public mutating func append(unixMilliseconds: Int64, to bytes: inout [UInt8]) {
        let (second, millisecond) = parts(unixMilliseconds: unixMilliseconds)
        bytes.append(contentsOf: second)
        bytes.append(UInt8(ascii: "."))
        DecimalDigits.append(millisecond, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
    }

    /// The time as `append` spells it, in two parts for a writer of its own: the calendar
    /// part up to the seconds (`2026-12-01T09:00:00`, kept for the next call), and the
    /// milliseconds, which follow after a `.` as three digits and a `Z`.
    public mutating func parts(unixMilliseconds: Int64) -> (second: [UInt8], millisecond: Int) {
        let (second, millisecond) = unixMilliseconds >= 0 ? (unixMilliseconds / 1000, unixMilliseconds % 1000)
                                                           : ((unixMilliseconds - 999) / 1000, ((unixMilliseconds % 1000) + 1000) % 1000)
        if second != cachedSecond {
            secondText.removeAll(keepingCapacity: true)
            UTCDateTime(unixSeconds: second).writeISO8601(fractional: false, to: &secondText)
            secondText.removeLast() // the "Z"
            cachedSecond = second
        }
        return (secondText, Int(millisecond))
    }
}

/// Integers in decimal, written into a byte buffer without building a `String`.
enum DecimalDigits {
    static func append(_ value: Int, to bytes: inout [UInt8]) {
        guard value != 0 else { return bytes.append(UInt8(ascii: "0")) }
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        var divisor: UInt = 1
        while divisor <= rest / 10 { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// `value` left-padded with zeros to at least `width` digits (negative values as 0).
    static func append(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        let value = max(0, value)
        var digits = 0
        var rest = value
        repeat {
            digits += 1
            rest /= 10
        } while rest > 0
        for _ in digits..<max(width, digits) { bytes.append(UInt8(ascii: "0")) }
        append(value, to: &bytes)
    }
}
