/// One header field of a parsed head: its interned name and where its name and value lie in
/// the head's bytes. Value ranges exclude the optional whitespace around the value.
public struct HTTPField: Sendable {
    /// The name compared ASCII case-insensitively; `.other` for names the gateway ignores.
    public let name: HTTPFieldName
    /// The name with `_` read as `-` as well (`X_Forwarded_For` is a lookalike of
    /// `.xForwardedFor`); equal to `name` for exact matches.
    public let lookalike: HTTPFieldName
    let nameStart: Int32
    let nameEnd: Int32
    let valueStart: Int32
    let valueEnd: Int32

    public var nameRange: Range<Int> { Int(nameStart)..<Int(nameEnd) }
    public var valueRange: Range<Int> { Int(valueStart)..<Int(valueEnd) }
}

/// The header fields of one parsed head, in order and with duplicates, as byte ranges over
/// the head's own bytes: nothing is copied per field, and a field the gateway does not touch
/// is forwarded as the bytes it arrived as.
///
/// The `String` accessors are for a gateway endpoint reading a few fields; the proxy path
/// works on `storage` and the ranges.
public struct HTTPFields: Sendable, RandomAccessCollection {
    /// The bytes the ranges point into (the whole head as received).
    public let storage: [UInt8]
    private let list: [HTTPField]

    init(storage: [UInt8], list: [HTTPField]) {
        self.storage = storage
        self.list = list
    }

    /// No fields.
    public init() {
        self.init(storage: [], list: [])
    }

    /// Parses a field section on its own (`Name: value` lines ending in a blank line), with
    /// the head parser's rules; for trailers and tests.
    public init(parsing section: [UInt8]) throws(HTTPParseError) {
        var lines = LineCursor()
        self = try HTTPHeadParser.parseFields(section, &lines)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { list.count }
    public subscript(position: Int) -> HTTPField { list[position] }

    // MARK: Bytes

    /// Whether the field's value equals `text`, ASCII case-insensitively.
    public func value(of field: HTTPField, equalsIgnoringCase text: String) -> Bool {
        equalsIgnoringCase(field.valueRange, text)
    }

    /// Whether any `name` field lists `token` in its comma-separated value (`Connection: close`).
    public func containsToken(_ token: String, in name: HTTPFieldName) -> Bool {
        var found = false
        for field in list where field.name == name {
            forEachListElement(of: field) { range in
                if !found, equalsIgnoringCase(range, token) { found = true }
            }
        }
        return found
    }

    /// Calls `body` with the range of every non-empty element of a comma-separated value.
    public func forEachListElement(of field: HTTPField, _ body: (Range<Int>) -> Void) {
        let bytes = storage.span
        var start = field.valueRange.lowerBound
        let end = field.valueRange.upperBound
        while start <= end {
            var stop = start
            while stop < end, bytes[stop] != UInt8(ascii: ",") { stop += 1 }
            var a = start, b = stop
            while a < b, bytes[a] == 0x20 || bytes[a] == 0x09 { a += 1 }
            while b > a, bytes[b - 1] == 0x20 || bytes[b - 1] == 0x09 { b -= 1 }
            if a < b { body(a..<b) }
            start = stop + 1
        }
    }

    /// Whether `storage[range]` spells `text`, ASCII case-insensitively (no allocation).
    public func equalsIgnoringCase(_ range: Range<Int>, _ text: String) -> Bool {
        guard range.count == text.utf8.count else { return false }
        let bytes = storage.span
        // A native or small string's bytes directly (iterating its UTF-8 view cost ~3 times as
        // much: `close`, `keep-alive` and `bearer` are compared per proxied request). Its own
        // loop, not the byte overload's: routing both through one raw-buffer helper changed the
        // inlining around its callers, +~450 instructions per proxied request (stop 24).
        if let equal = text.utf8.withContiguousStorageIfAvailable({ text in
            var index = range.lowerBound
            for byte in text {
                if lowered(bytes[index]) != lowered(byte) { return false }
                index += 1
            }
            return true
        }) {
            return equal
        }
        return equalsIgnoringCase(range, Array(text.utf8))
    }

    /// Whether `storage[range]` equals `wanted` ASCII case-insensitively.
    public func equalsIgnoringCase(_ range: Range<Int>, _ wanted: [UInt8]) -> Bool {
        guard range.count == wanted.count, range.lowerBound >= 0, range.upperBound <= storage.count else { return false }
        guard !wanted.isEmpty else { return true }
        // Both sides as raw buffers, bounds checked once above (per byte, the two checked
        // subscripts cost ~3 times the comparison: the bearer scheme and every `Connection`
        // option are compared per proxied request).
        return storage.withUnsafeBufferPointer { bytes in
            wanted.withUnsafeBufferPointer { wanted in
                let base = bytes.baseAddress! + range.lowerBound
                for index in 0..<wanted.count where lowered(base[index]) != lowered(wanted[index]) { return false }
                return true
            }
        }
    }

    /// Whether `storage[range]` spells the constant `text` (ASCII, lower case),
    /// case-insensitively: eight bytes at a time, lowered as a word, while eight are there to
    /// read, then byte by byte (the `[UInt8]` form cost ~20 instructions a byte for the
    /// `keep-alive` and `Bearer ` compared per proxied request).
    public func equalsIgnoringCase(_ range: Range<Int>, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard range.count == count, range.lowerBound >= 0, range.upperBound <= storage.count else { return false }
        let bytes = storage.span
        let wanted = UnsafeRawPointer(text.utf8Start)
        var index = 0
        while index &+ 8 <= count {
            let word = UInt64(littleEndian: bytes.bytes.unsafeLoadUnaligned(fromByteOffset: range.lowerBound &+ index, as: UInt64.self))
            let want = UInt64(littleEndian: wanted.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            if HTTPFieldName.loweredWord(word) != want { return false }
            index &+= 8
        }
        while index < count {
            if lowered(bytes[range.lowerBound &+ index]) != wanted.load(fromByteOffset: index, as: UInt8.self) { return false }
            index &+= 1
        }
        return true
    }

    /// Whether `storage[range]` is exactly `other` (a bearer token of several hundred bytes
    /// against a cached one, per proxied request): one `memcmp` (`bytesEqual`).
    public static func bytes(_ storage: [UInt8], _ range: Range<Int>, equal other: [UInt8]) -> Bool {
        range.count == other.count && bytesEqual(storage, range, other)
    }

    /// Whether the field bytes `storage[range]` equal `other[offset..<offset + range.count]`
    /// (a tenant's App ID compared in two pieces): `bytesEqual`'s `memcmp`.
    public func bytes(in range: Range<Int>, equal other: [UInt8], at offset: Int) -> Bool {
        bytesEqual(storage, range, other, at: offset)
    }

    // MARK: Strings, on demand

    /// The first value of an interned name, as a `String`.
    public subscript(name: HTTPFieldName) -> String? {
        for field in list where field.name == name { return value(field) }
        return nil
    }

    /// The first value of `name` (any name, compared ASCII case-insensitively).
    public subscript(name: String) -> String? {
        for field in list where equalsIgnoringCase(field.nameRange, name) { return value(field) }
        return nil
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        list.filter { equalsIgnoringCase($0.nameRange, name) }.map(value)
    }

    public func name(_ field: HTTPField) -> String { String(decoding: storage[field.nameRange], as: UTF8.self) }
    public func value(_ field: HTTPField) -> String { String(decoding: storage[field.valueRange], as: UTF8.self) }

    /// Every field as a pair of strings (diagnostics and tests).
    public var fields: [(name: String, value: String)] { list.map { (name($0), value($0)) } }
}

@inline(__always)
func lowered(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}
