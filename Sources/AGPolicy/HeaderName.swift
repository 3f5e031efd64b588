import AGConfig

/// Header-name comparisons in the form the anti-spoofing rule reads names: ASCII lower-case,
/// with `_` read as `-` (some frameworks turn `X_Attest_Key_Id` into `X-Attest-Key-Id`).
/// Compares byte by byte, without allocating, because it runs for every inbound field.
public enum HeaderName {
    /// `name` in normalized form.
    public static func normalized(_ name: String) -> [UInt8] {
        name.utf8.map(normalize)
    }

    /// Whether `name` normalizes to `target` (which must already be normalized).
    public static func matches(_ name: String, _ target: [UInt8]) -> Bool {
        let utf8 = name.utf8
        guard utf8.count == target.count else { return false }
        var index = 0
        for byte in utf8 {
            if normalize(byte) != target[index] { return false }
            index += 1
        }
        return true
    }

    /// Whether `name` normalizes to something starting with `x-attest-`.
    public static func hasAttestPrefix(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count >= attestPrefix.count else { return false }
        var index = 0
        for byte in utf8 {
            if index == attestPrefix.count { return true }
            if normalize(byte) != attestPrefix[index] { return false }
            index += 1
        }
        return true
    }

    @usableFromInline static let attestPrefix = Array("x-attest-".utf8)

    @inlinable @inline(__always)
    static func normalize(_ byte: UInt8) -> UInt8 {
        if byte == UInt8(ascii: "_") { return UInt8(ascii: "-") }
        if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { return byte | 0x20 }
        return byte
    }
}

extension HeaderName {
    /// Whether `bytes[range]` normalizes to `target` (already normalized). Inlinable: it runs
    /// for every inbound field.
    @inlinable
    public static func matches(_ bytes: Span<UInt8>, _ range: Range<Int>, _ target: [UInt8]) -> Bool {
        guard range.count == target.count else { return false }
        var index = 0
        for position in range {
            if normalize(bytes[position]) != target[index] { return false }
            index += 1
        }
        return true
    }

    /// Whether `bytes[range]` normalizes to something starting with `x-attest-`.
    @inlinable
    public static func hasAttestPrefix(_ bytes: Span<UInt8>, _ range: Range<Int>) -> Bool {
        guard range.count >= attestPrefix.count else { return false }
        for index in 0..<attestPrefix.count where normalize(bytes[range.lowerBound + index]) != attestPrefix[index] {
            return false
        }
        return true
    }
}
