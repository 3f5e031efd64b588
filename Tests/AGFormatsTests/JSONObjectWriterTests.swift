@testable import AGFormats
import Testing

/// The byte-writing shortcuts of `JSONObjectWriter` (no `String` per number, one copy per clean
/// string) against the spellings they must reproduce.
@Suite("JSON object writer")
struct JSONObjectWriterTests {
    /// The escaping every string went through before: byte by byte, as `JSONValue` specifies.
    static func referenceEscaped(_ text: String) -> String {
        var out = Array("\"".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case 0x0A: out += Array("\\n".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0x09: out += Array("\\t".utf8)
            case 0x00..<0x20: out += Array(("\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)).utf8)
            // Bytes, not one-byte Strings: a multi-byte character's bytes stay together.
            default: out.append(byte)
            }
        }
        return String(decoding: out + Array("\"".utf8), as: UTF8.self)
    }

    static func written(_ build: (inout JSONObjectWriter) -> Void) -> String {
        var writer = JSONObjectWriter()
        build(&writer)
        return writer.finished()
    }

    @Test("strings and substrings are escaped exactly as before")
    func escaping() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", " ", "\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}", "é", "日本", "/", "😀", "{}", "0"]
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 0...24, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let expected = "{\"k\":" + Self.referenceEscaped(text) + "}"
            #expect(Self.written { $0.add("k", text) } == expected)
            let padded = "<" + text + ">"
            let inner = padded.dropFirst().dropLast()
            #expect(Self.written { $0.add("k", inner) } == expected)
        }
    }

    /// The clean test against the byte rule: every byte value at every
    /// position of 1 to 17 bytes (whole words, tails, both), among fillers that sit next to
    /// the escapes (`!` and `#` around `"`, `[` and `]` around `\`, space beside 0x1F, high
    /// bytes), alone and after an escape earlier in the bytes; and read out of a larger
    /// buffer whose neighbouring bytes need escaping (the scan must stop at the end).
    @Test("the clean test flags exactly the bytes that need escaping")
    func cleanTestFlagsExactlyTheEscapes() {
        let needsEscape = { (byte: UInt8) in byte < 0x20 || byte == 0x22 || byte == 0x5C }
        for filler in [UInt8(ascii: "a"), 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x80, 0xFF] {
            for length in 1...17 {
                for position in 0..<length {
                    for value in 0...255 {
                        for earlier in [nil, UInt8(0x22)] as [UInt8?] {
                            var bytes = [UInt8](repeating: filler, count: length)
                            bytes[position] = UInt8(value)
                            if let earlier, position > 0 { bytes[0] = earlier }
                            let expected = !bytes.contains(where: needsEscape)
                            #expect(JSONValue.isClean(bytes.span) == expected, "\(bytes)")
                            let padded = [0x22] + bytes + [0x5C, 0x00, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22]
                            #expect(JSONValue.isClean(padded.span.extracting(1..<(length + 1))) == expected, "\(bytes)")
                        }
                    }
                }
            }
        }
        #expect(JSONBytes.needsNoEscaping("/api/v1/items?id=42&sort=é日本😀"))
        #expect(!JSONBytes.needsNoEscaping("/api/v1/items?id=42&sort=é日本😀\""))
    }

    @Test("thousandths are spelled as the Double they stand for")
    func thousandths() {
        var values = Array(0...20_000) + [999_999, 1_000_000, 1_000_001, 123_456_789, -1, -1_500, Int(Int32.max)]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { values.append(Int.random(in: 0..<1_000_000_000_000_000, using: &generator)) }
        for value in values {
            let viaDouble = Self.written { $0.add("d", Double(value) / 1000) }
            #expect(Self.written { $0.add("d", thousandths: value) } == viaDouble, "\(value)")
        }
    }

    @Test("integers without String")
    func integers() {
        for value in [0, 1, -1, 9, 10, 99, 100, 12_345, Int.max, Int.min, -987_654_321] {
            #expect(Self.written { $0.add("n", value) } == "{\"n\":\(value)}")
        }
    }

    @Test("times, and a reused writer")
    func timesAndReuse() {
        var writer = JSONObjectWriter()
        writer.add("ts", UTCDateTime(unixMilliseconds: 1_796_022_230_123), fractional: true)
        writer.add("b", true)
        #expect(writer.finished() == #"{"ts":"2026-11-30T07:03:50.123Z","b":true}"#)
        writer.reset()
        writer.add("ts", UTCDateTime(unixMilliseconds: 5), fractional: false)
        var line: [UInt8] = Array("> ".utf8)
        writer.finish(appendingTo: &line)
        #expect(String(decoding: line, as: UTF8.self) == #"> {"ts":"1970-01-01T00:00:00Z"}"#)
    }

    /// The access log's timestamp: the calendar part is cached per second in one reused clock;
    /// every millisecond must still read as the uncached spelling, across second, day, year and
    /// epoch boundaries, going forwards and backwards.
    @Test("cached timestamps spell what UTCDateTime spells")
    func cachedTimestamps() {
        var times: [Int64] = [0, 1, 999, 1000, 1001, -1, -999, -1000, -1001, 59_999, 60_000, 86_399_999, 86_400_000,
                              1_796_022_230_123, 1_796_022_230_999, 1_796_022_231_000, 1_796_022_230_000,
                              1_798_761_599_999, 1_798_761_600_000, 951_782_400_000, 253_402_300_799_999]
        var generator = SystemRandomNumberGenerator()
        var walk: Int64 = 1_796_022_230_000
        for _ in 0..<5_000 {
            walk += Int64.random(in: -700...1_300, using: &generator)
            times.append(walk)
            times.append(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &generator))
        }
        var clock = RFC3339Clock()
        for time in times {
            var bytes: [UInt8] = []
            clock.append(unixMilliseconds: time, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == UTCDateTime(unixMilliseconds: time).iso8601(fractional: true), "\(time)")
        }
    }
}
