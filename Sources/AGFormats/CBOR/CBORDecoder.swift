/// Why a CBOR input was refused.
public enum CBORError: Error, Sendable, Equatable {
    /// The input ended inside a data item.
    case truncated
    /// Bytes remain after the top-level item.
    case trailingBytes
    /// Nesting deeper than the decoder's limit.
    case tooDeep
    /// A length or count larger than the remaining input could hold.
    case lengthExceedsInput
    /// Indefinite lengths, tags, floats, reserved or unassigned encodings.
    case unsupported(majorType: UInt8, additionalInfo: UInt8)
    /// A text string that is not valid UTF-8.
    case invalidUTF8
    /// A map with the same key twice.
    case duplicateMapKey
    /// An integer argument not in its shortest form.
    case nonCanonicalArgument
}

/// A strict, bounded CBOR decoder.
///
/// It never allocates more than the input could justify (every length and count is checked
/// against the bytes left), limits nesting, and refuses indefinite-length items, tags and
/// floating-point values, none of which App Attest produces. Integer arguments may use any
/// width except where `requireShortestArguments` is set.
public struct CBORDecoder: Sendable {
    /// Deepest nesting of arrays and maps accepted.
    public var maximumDepth: Int
    /// Reject integer arguments that are not encoded in the shortest form (deterministic CBOR).
    public var requireShortestArguments: Bool

    public init(maximumDepth: Int = 16, requireShortestArguments: Bool = false) {
        self.maximumDepth = maximumDepth
        self.requireShortestArguments = requireShortestArguments
    }

    /// Decodes exactly one data item spanning all of `input`.
    public func decode(_ input: [UInt8]) throws(CBORError) -> CBORValue {
        var reader = Reader(bytes: input, maximumDepth: maximumDepth, requireShortestArguments: requireShortestArguments)
        let value = try reader.item(depth: 0)
        guard reader.offset == input.count else { throw .trailingBytes }
        return value
    }
}

/// A cursor over the input; every read is bounds-checked by the array itself as well.
private struct Reader {
    let bytes: [UInt8]
    let maximumDepth: Int
    let requireShortestArguments: Bool
    var offset = 0

    init(bytes: [UInt8], maximumDepth: Int, requireShortestArguments: Bool) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.requireShortestArguments = requireShortestArguments
    }

    var remaining: Int { bytes.count - offset }

    mutating func byte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) throws(CBORError) -> ArraySlice<UInt8> {
        guard count <= remaining else { throw .lengthExceedsInput }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    /// The integer argument that follows an initial byte with additional info `info`.
    mutating func argument(majorType: UInt8, info: UInt8) throws(CBORError) -> UInt64 {
        let width: Int
        switch info {
        case 0..<24: return UInt64(info)
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        default: throw .unsupported(majorType: majorType, additionalInfo: info)
        }
        guard width <= remaining else { throw .truncated }
        var value: UInt64 = 0
        for _ in 0..<width {
            value = value << 8 | UInt64(bytes[offset])
            offset += 1
        }
        if requireShortestArguments {
            let shortest = value < 24 ? 0 : value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
            guard shortest == width else { throw .nonCanonicalArgument }
        }
        return value
    }

    /// A length or element count, bounded by what the remaining input can possibly hold.
    mutating func length(majorType: UInt8, info: UInt8, minimumBytesPerUnit: Int) throws(CBORError) -> Int {
        let value = try argument(majorType: majorType, info: info)
        guard value <= UInt64(remaining / minimumBytesPerUnit) else { throw .lengthExceedsInput }
        return Int(value)
    }

    mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        let initial = try byte()
        let majorType = initial >> 5
        let info = initial & 0x1F
        switch majorType {
        case 0:
            return .unsigned(try argument(majorType: majorType, info: info))
        case 1:
            return .negative(try argument(majorType: majorType, info: info))
        case 2:
            let count = try length(majorType: majorType, info: info, minimumBytesPerUnit: 1)
            return .bytes(Array(try take(count)))
        case 3:
            let count = try length(majorType: majorType, info: info, minimumBytesPerUnit: 1)
            let utf8 = try take(count)
            guard let text = String(validating: utf8, as: UTF8.self) else { throw .invalidUTF8 }
            return .text(text)
        case 4:
            guard depth < maximumDepth else { throw .tooDeep }
            let count = try length(majorType: majorType, info: info, minimumBytesPerUnit: 1)
            var elements = [CBORValue]()
            elements.reserveCapacity(count)
            for _ in 0..<count {
                elements.append(try item(depth: depth + 1))
            }
            return .array(elements)
        case 5:
            guard depth < maximumDepth else { throw .tooDeep }
            let count = try length(majorType: majorType, info: info, minimumBytesPerUnit: 2)
            var entries = [(key: CBORValue, value: CBORValue)]()
            entries.reserveCapacity(count)
            // Hashed, not scanned: a scan is quadratic, and a 64 KiB body holds a map of 16,000
            // entries that took a debug build two minutes to check (found by the cbor fuzz target).
            var keys = Set<CBORValue>(minimumCapacity: count)
            for _ in 0..<count {
                let key = try item(depth: depth + 1)
                let value = try item(depth: depth + 1)
                guard keys.insert(key).inserted else { throw .duplicateMapKey }
                entries.append((key, value))
            }
            return .map(entries)
        case 7:
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: return .undefined
            default: throw .unsupported(majorType: majorType, additionalInfo: info)
            }
        default:
            // Major type 6: tags.
            throw .unsupported(majorType: majorType, additionalInfo: info)
        }
    }
}
