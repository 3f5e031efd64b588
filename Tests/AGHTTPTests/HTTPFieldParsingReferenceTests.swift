@testable import AGHTTP
import Testing

/// The one-pass field parser against a plain reference of the rules (split on CRLF, refuse a
/// bare LF, then check each line): on thousands of random field sections drawn from the bytes
/// that matter, both accept the same sections with the same fields, or refuse with the same error.
@Suite struct HTTPFieldParsingReferenceTests {
    /// xorshift64*: deterministic, so a failure reproduces.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 2_685_821_657_736_338_717
        }
    }

    /// Every byte against RFC 9110's `tchar`, spelled out as the RFC lists it.
    @Test func tokenBytesAreTheRFCsTchars() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        #expect(tchar.count == 77)
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPHeadParser.isTokenByte(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }

    static let alphabet: [UInt8] = Array("Aa-_:  \t\r\n\r\nxX1;".utf8) + [0x00, 0x01, 0x7F, 0x80, 0xFF]

    static func reference(_ bytes: [UInt8]) -> Result<[(String, String)], HTTPParseError> {
        var fields: [(String, String)] = []
        var start = 0
        while true {
            guard let lf = bytes[start...].firstIndex(of: 0x0A) else { return .failure(.malformed("header section not terminated")) }
            guard lf > start, bytes[lf - 1] == 0x0D else { return .failure(.malformed("bare LF line ending")) }
            let line = Array(bytes[start..<(lf - 1)])
            start = lf + 1
            if line.isEmpty { return .success(fields) }
            guard fields.count < HTTPHeadParser.maxHeaderCount else { return .failure(.headTooLarge) }
            guard line[0] != 0x20, line[0] != 0x09 else { return .failure(.malformed("obsolete line folding")) }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return .failure(.malformed("header line without colon")) }
            guard colon > 0, line[..<colon].allSatisfy(HTTPHeadParser.isTokenByte) else {
                return .failure(.malformed("malformed header name"))
            }
            var value = line[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            guard value.allSatisfy({ ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }) else {
                return .failure(.malformed("control character in header value"))
            }
            fields.append((String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
    }

    /// Records an issue unless the parser and the reference agree on `bytes` (the same fields,
    /// or the same error); says whether the section was accepted.
    static func parserMatchesReference(_ bytes: [UInt8]) -> Bool {
        let expected = reference(bytes)
        let actual = Result { () throws(HTTPParseError) in try HTTPFields(parsing: bytes).fields }
        switch (expected, actual) {
        case (.success(let a), .success(let b)):
            #expect(a.map(\.0) == b.map(\.name) && a.map(\.1) == b.map(\.value), "\(bytes)")
            return true
        case (.failure(let a), .failure(let b)):
            #expect(a == b, "\(bytes)")
        default:
            Issue.record("reference \(expected) but parser \(actual) for \(bytes)")
        }
        return false
    }

    @Test func randomSectionsMatchTheReference() {
        var generator = Generator(state: 0x9E37_79B9_7F4A_7C15)
        var accepted = 0
        for _ in 0..<5000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes += Array("X-N\(Int.random(in: 0...9, using: &generator)): v".utf8)
                for _ in 0..<Int.random(in: 0...3, using: &generator) {
                    let at = Int.random(in: 0...bytes.count, using: &generator)
                    bytes.insert(Self.alphabet.randomElement(using: &generator)!, at: at)
                }
                bytes += [0x0D, 0x0A]
            }
            bytes += [0x0D, 0x0A]
            if Self.parserMatchesReference(bytes) { accepted += 1 }
        }
        #expect(accepted > 500, "the sample exercises both outcomes")
    }

    /// Long values, so the parser's word-at-a-time paths run (sixteen bytes, eight, and the
    /// skip to a word's first invisible byte), with the bytes that end them (controls, DEL, CR,
    /// LF) at every offset of a word and obs-text beside them.
    @Test func longValuesMatchTheReference() {
        var generator = Generator(state: 0xD1B5_4A32_D192_ED03)
        let rare: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x09, 0x7F, 0x0D, 0x0A]
        let common: [UInt8] = Array("abcXYZ019-._~!#$%&'*+^`|=/?@[]{}\"<>,;".utf8) + [0x21, 0x7E, 0x80, 0xA0, 0xFE, 0xFF]
        var accepted = 0
        for _ in 0..<5000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                bytes += Array("X-Long: ".utf8)
                for _ in 0..<Int.random(in: 0...80, using: &generator) {
                    let pickRare = Int.random(in: 0..<40, using: &generator) == 0
                    bytes.append((pickRare ? rare : common).randomElement(using: &generator)!)
                }
                bytes += [0x0D, 0x0A]
            }
            bytes += [0x0D, 0x0A]
            if Self.parserMatchesReference(bytes) { accepted += 1 }
        }
        #expect(accepted > 500 && accepted < 4900, "the sample exercises both outcomes (\(accepted) accepted)")
    }

    /// Long names, so the parser's sixteen-at-a-time name scan runs, ending at every offset of
    /// a vector: token bytes with now and then a delimiter, a control, a space or obs-text.
    @Test func longNamesMatchTheReference() {
        var generator = Generator(state: 0x2545_F491_4F6C_DD1D)
        let rare: [UInt8] = Array("\"(),/;<=>?@[\\]{} \t".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xFF, 0x0D, 0x0A]
        let common: [UInt8] = Array("abcXYZ019-._~!#$%&'*+^`|".utf8)
        var accepted = 0
        for _ in 0..<5000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                for _ in 0..<Int.random(in: 0...40, using: &generator) {
                    let pickRare = Int.random(in: 0..<60, using: &generator) == 0
                    bytes.append((pickRare ? rare : common).randomElement(using: &generator)!)
                }
                bytes += Array(": v\r\n".utf8)
            }
            bytes += [0x0D, 0x0A]
            if Self.parserMatchesReference(bytes) { accepted += 1 }
        }
        #expect(accepted > 500 && accepted < 4900, "the sample exercises both outcomes (\(accepted) accepted)")
    }

    /// The word test finds the first invisible byte of every word the byte test would stop at:
    /// every byte value at every position, alone and with a second invisible byte after it
    /// (whose borrow must not hide or move the first).
    @Test func wordTestFindsTheFirstInvisibleByte() {
        let visible = { (byte: UInt8) in byte > 0x20 && byte != 0x7F }
        let stoppers: [UInt8?] = [nil, 0x00, 0x09, 0x0D, 0x20, 0x7F]
        for filler in [UInt8(ascii: "a"), 0x21, 0x7E, 0x80, 0xFF] {
            for position in 0..<8 {
                for value in 0...255 {
                    for later in stoppers {
                        var word = [UInt8](repeating: filler, count: 8)
                        word[position] = UInt8(value)
                        if let later, position < 7 { word[7] = later }
                        let expected = word.firstIndex { !visible($0) } ?? 8
                        // Loaded from memory, as the parser loads it.
                        let loaded = word.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                        let flags = HTTPHeadParser.invisibleFlags(loaded)
                        #expect(HTTPHeadParser.visiblePrefix(flags) == expected, "\(word)")
                        #expect((flags == 0) == (expected == 8), "\(word)")
                    }
                }
            }
        }
    }

    /// The 16-byte vector test against the byte rule: every byte value at every position, in
    /// visible fillers (ASCII and obs-text), alone and with a later invisible byte.
    @Test func vectorTestFlagsExactlyTheInvisibleBytes() {
        let visible = { (byte: UInt8) in byte > 0x20 && byte != 0x7F }
        let stoppers: [UInt8?] = [nil, 0x00, 0x09, 0x0D, 0x20, 0x7F]
        for filler in [UInt8(ascii: "a"), 0x21, 0x7E, 0x80, 0xFF] {
            for position in 0..<16 {
                for value in 0...255 {
                    for later in stoppers {
                        var bytes = [UInt8](repeating: filler, count: 16)
                        bytes[position] = UInt8(value)
                        if let later, position < 15 { bytes[15] = later }
                        var expected: UInt32 = 0
                        for (index, byte) in bytes.enumerated() where !visible(byte) { expected |= 1 << index }
                        let mask = bytes.withUnsafeBytes { HTTPHeadParser.invisibleMask16($0.baseAddress!) }
                        #expect(mask == expected, "\(bytes)")
                    }
                }
            }
        }
    }

    /// The 16-byte name test against `isTokenByte` (itself checked against the RFC's list):
    /// every byte value at every position, in token fillers, alone and before a colon.
    @Test func vectorNameTestFlagsExactlyTheNonTokenBytes() {
        for filler in [UInt8(ascii: "a"), UInt8(ascii: "Z"), UInt8(ascii: "0"), UInt8(ascii: "~"), UInt8(ascii: "!")] {
            for position in 0..<16 {
                for value in 0...255 {
                    for later in [nil, UInt8(ascii: ":")] as [UInt8?] {
                        var bytes = [UInt8](repeating: filler, count: 16)
                        bytes[position] = UInt8(value)
                        if let later, position < 15 { bytes[15] = later }
                        var expected: UInt32 = 0
                        for (index, byte) in bytes.enumerated() where !HTTPHeadParser.isTokenByte(byte) { expected |= 1 << index }
                        let mask = bytes.withUnsafeBytes { HTTPHeadParser.nonTokenMask16($0.baseAddress!) }
                        #expect(mask == expected, "\(bytes)")
                    }
                }
            }
        }
    }

    /// The interned-name table against a plain spelled-out comparison: every known name in
    /// random case with `-` and `_` mixed, truncated and extended spellings, and random names.
    @Test func classifyMatchesAPlainComparison() {
        func reference(_ name: [UInt8]) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
            let lowered = name.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }
            for known in HTTPFieldName.allCases where known != .other {
                let spelling = Array(known.text.lowercased().utf8)
                if lowered == spelling { return (known, known) }
                if lowered.map({ $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0 }) == spelling { return (.other, known) }
            }
            return (.other, .other)
        }
        var generator = Generator(state: 0x9E37_79B9_7F4A_7C15)
        var names: [[UInt8]] = []
        for known in HTTPFieldName.allCases where known != .other {
            let spelling = Array(known.text.utf8)
            names.append(spelling)
            names.append(Array(spelling.dropLast()))
            names.append(spelling + [UInt8(ascii: "x")])
            for _ in 0..<40 {
                names.append(spelling.map { byte in
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: byte >= 97 && byte <= 122 ? byte - 32 : byte
                    case 1 where byte == UInt8(ascii: "-"): UInt8(ascii: "_")
                    default: byte
                    }
                })
            }
        }
        // Letters and their neighbours at both ends of A–Z and a–z, and "-"/"_" beside them.
        let letters = Array("aAhHoOsStT-_xX@[`{^~|zZ".utf8)
        for _ in 0..<5_000 {
            names.append((0..<Int.random(in: 1...20, using: &generator)).map { _ in letters.randomElement(using: &generator)! })
        }
        for name in names {
            let expected = reference(name)
            // At the very end of its bytes (read byte by byte), and inside a longer head (read
            // a word at a time, with the bytes after the name masked off).
            let alone = HTTPFieldName.classify(name.span, 0, name.count)
            #expect(alone.exact == expected.exact && alone.lookalike == expected.lookalike,
                    "\(String(decoding: name, as: UTF8.self))")
            let offset = Int.random(in: 0...9, using: &generator)
            let embedded = [UInt8](repeating: UInt8(ascii: "Z"), count: offset) + name + Array(": value-_AZ\r\n\r\n".utf8)
            let inside = HTTPFieldName.classify(embedded.span, offset, offset + name.count)
            #expect(inside.exact == expected.exact && inside.lookalike == expected.lookalike,
                    "\(String(decoding: name, as: UTF8.self)) at offset \(offset)")
        }
    }
}
