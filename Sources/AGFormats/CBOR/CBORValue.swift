/// A decoded CBOR (RFC 8949) data item, restricted to what App Attest and WebAuthn use.
public indirect enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Map entries in encoded order; keys are unique.
    case map([(key: CBORValue, value: CBORValue)])
    case bool(Bool)
    case null
    case undefined

    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case let (.unsigned(a), .unsigned(b)), let (.negative(a), .negative(b)): a == b
        case let (.bytes(a), .bytes(b)): a == b
        case let (.text(a), .text(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.map(a), .map(b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case let (.bool(a), .bool(b)): a == b
        case (.null, .null), (.undefined, .undefined): true
        default: false
        }
    }

    /// Consistent with `==`: map entries are hashed in order, as they are compared.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let value): hasher.combine(0 as UInt8); hasher.combine(value)
        case .negative(let value): hasher.combine(1 as UInt8); hasher.combine(value)
        case .bytes(let bytes): hasher.combine(2 as UInt8); hasher.combine(bytes)
        case .text(let text): hasher.combine(3 as UInt8); hasher.combine(text)
        case .array(let elements): hasher.combine(4 as UInt8); hasher.combine(elements)
        case .map(let entries):
            hasher.combine(5 as UInt8)
            hasher.combine(entries.count)
            for entry in entries {
                hasher.combine(entry.key)
                hasher.combine(entry.value)
            }
        case .bool(let value): hasher.combine(6 as UInt8); hasher.combine(value)
        case .null: hasher.combine(7 as UInt8)
        case .undefined: hasher.combine(8 as UInt8)
        }
    }

    /// The value for a text key when this is a map.
    public subscript(key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    /// The payload of a byte string.
    public var bytesValue: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    /// The payload of a text string.
    public var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The elements of an array.
    public var arrayValue: [CBORValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The value of an integer that fits in `Int64`.
    public var integerValue: Int64? {
        switch self {
        case .unsigned(let value): value <= UInt64(Int64.max) ? Int64(value) : nil
        case .negative(let value): value <= UInt64(Int64.max) ? -1 - Int64(value) : nil
        default: nil
        }
    }
}
