/// An IPv4 or IPv6 address parsed from its textual form (no zone IDs).
public enum IPAddress: Sendable, Hashable, CustomStringConvertible {
    case v4(UInt32)
    case v6(UInt128)

    /// Dotted quad (`192.0.2.1`) or RFC 4291 text (`2001:db8::1`, `::ffff:192.0.2.1`); `nil` otherwise.
    public init?(_ text: String) {
        // Bytes, not Characters: the check runs for every peer address a request is limited by.
        if text.utf8.contains(UInt8(ascii: ":")) {
            guard let value = Self.parseV6(Substring(text)) else { return nil }
            self = .v6(value)
        } else {
            guard let value = Self.parseV4(text.utf8[...]) else { return nil }
            self = .v4(value)
        }
    }

    /// An `X-Forwarded-For` entry: an address, `a.b.c.d:port`, `[v6]` or `[v6]:port` (proxies
    /// write all four); `nil` for anything else (`unknown`, obfuscated identifiers, junk).
    public init?(forwardedEntry entry: Substring) {
        var host = entry
        if entry.first == "[" {
            guard let close = entry.firstIndex(of: "]") else { return nil }
            guard Self.isPortSuffix(entry[entry.index(after: close)...]) else { return nil }
            host = entry[entry.index(after: entry.startIndex)..<close]
            guard host.contains(":") else { return nil }
        } else if let colon = entry.firstIndex(of: ":"), entry[entry.index(after: colon)...].firstIndex(of: ":") == nil {
            guard Self.isPortSuffix(entry[colon...]) else { return nil }
            host = entry[..<colon]
        }
        guard let address = IPAddress(String(host)) else { return nil }
        self = address
    }

    /// Empty, or `:` and a port: one to five digits, at most 65535 (`:99999` is no port, and
    /// an entry with it no address — stop 36's sweep found it read as one).
    private static func isPortSuffix(_ text: Substring) -> Bool {
        guard !text.isEmpty else { return true }
        let digits = text.dropFirst()
        return text.first == ":" && (1...5).contains(digits.count) && digits.allSatisfy { $0.isASCII && $0.isNumber }
            && Int(digits).map { $0 <= 65535 } == true
    }

    /// Width in bits: 32 or 128.
    public var bitWidth: Int {
        switch self {
        case .v4: return 32
        case .v6: return 128
        }
    }

    /// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), else `self`.
    public var unmappingIPv4: IPAddress {
        if case .v6(let value) = self, value >> 32 == 0xFFFF {
            return .v4(UInt32(truncatingIfNeeded: value))
        }
        return self
    }

    public var description: String {
        switch self {
        case .v4(let value):
            return (0..<4).map { String((value >> (24 - 8 * $0)) & 0xFF) }.joined(separator: ".")
        case .v6(let value):
            // RFC 5952 section 5: an IPv4-mapped address ends in dotted decimal.
            if value >> 32 == 0xFFFF { return "::ffff:" + IPAddress.v4(UInt32(truncatingIfNeeded: value)).description }
            let groups = (0..<8).map { UInt16(truncatingIfNeeded: value >> (112 - 16 * $0)) }
            // RFC 5952: compress the longest run (of two or more) of zero groups.
            var best: (start: Int, length: Int) = (-1, 0)
            var index = 0
            while index < 8 {
                guard groups[index] == 0 else { index += 1; continue }
                let start = index
                while index < 8, groups[index] == 0 { index += 1 }
                if index - start > best.length { best = (start, index - start) }
            }
            let hex = groups.map { String($0, radix: 16) }
            guard best.length >= 2 else { return hex.joined(separator: ":") }
            let head = hex[..<best.start].joined(separator: ":")
            let tail = hex[(best.start + best.length)...].joined(separator: ":")
            return head + "::" + tail
        }
    }

    /// A dotted quad, read in one pass over its UTF-8 bytes: four octets of one to three ASCII
    /// digits, each at most 255; leading zeros are refused (some stacks read them as octal).
    private static func parseV4(_ text: Substring.UTF8View) -> UInt32? {
        var value: UInt32 = 0
        var octets = 0
        var octet: UInt32 = 0
        var digits = 0
        var leadingZero = false
        for byte in text {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, octets < 3 else { return nil }
                value = value << 8 | octet
                octets += 1
                octet = 0
                digits = 0
                leadingZero = false
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3, !leadingZero else { return nil }
            if digits == 0, byte == UInt8(ascii: "0") { leadingZero = true }
            octet = octet * 10 + UInt32(byte - UInt8(ascii: "0"))
            digits += 1
            guard octet <= 255 else { return nil }
        }
        guard digits > 0, octets == 3 else { return nil }
        return value << 8 | octet
    }

    private static func parseV6(_ text: Substring) -> UInt128? {
        guard let gap = text.firstRange(of: "::") else {
            return parseGroups(text, allowIPv4Tail: true).flatMap { $0.count == 8 ? combine($0) : nil }
        }
        let after = text[gap.upperBound...]
        guard !after.contains("::"), !after.hasPrefix(":"),
              let head = parseGroups(text[..<gap.lowerBound], allowIPv4Tail: false),
              let tail = parseGroups(after, allowIPv4Tail: true),
              head.count + tail.count <= 7
        else { return nil }
        return combine(head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail)
    }

    private static func combine(_ groups: [UInt16]) -> UInt128 {
        groups.reduce(UInt128(0)) { $0 << 16 | UInt128($1) }
    }

    /// Colon-separated hex groups; the last may be a dotted quad (two groups).
    private static func parseGroups(_ text: Substring, allowIPv4Tail: Bool) -> [UInt16]? {
        guard !text.isEmpty else { return [] }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        var groups: [UInt16] = []
        for (index, part) in parts.enumerated() {
            if index == parts.count - 1, allowIPv4Tail, part.contains(".") {
                guard let v4 = parseV4(part.utf8) else { return nil }
                groups.append(UInt16(v4 >> 16))
                groups.append(UInt16(v4 & 0xFFFF))
            } else {
                guard (1...4).contains(part.count), part.allSatisfy(\.isHexDigit),
                      let group = UInt16(part, radix: 16)
                else { return nil }
                groups.append(group)
            }
        }
        return groups
    }
}
