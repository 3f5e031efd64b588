/// A fast path for the small request bodies of the attestation routes: a JSON object whose
/// members are all strings of printable ASCII without escapes (`{"keyId":"…","assertion":"…"}`).
///
/// `scan` either returns the members or nil, never an error: nil means "not that simple
/// shape", and the caller then parses with `JSONValue(parsing:)`, which decides — so every
/// refusal of the strict parser (duplicate names, control characters, bad UTF-8, trailing
/// data…) stays its refusal. Whatever `scan` accepts, the strict parser accepts with the
/// same members (`JSONFlatObjectTests` checks this on mutated bodies): with only printable
/// ASCII there is no escape, no UTF-8 to validate, and byte equality is string equality, so
/// duplicate names are found by comparing bytes.
public enum JSONFlatObject {
    /// At most this many members take the fast path (the duplicate check is quadratic).
    public static let maximumMembers = 16

    public static func scan(_ body: [UInt8]) -> [(name: String, value: String)]? {
        body.withUnsafeBufferPointer { scan(buffer: $0) }
    }

    private static func scan(buffer bytes: UnsafeBufferPointer<UInt8>) -> [(name: String, value: String)]? {
        var offset = 0
        let end = bytes.count

        func skipWhitespace() {
            while offset < end, bytes[offset] == 0x20 || bytes[offset] == 0x0A || bytes[offset] == 0x0D || bytes[offset] == 0x09 {
                offset += 1
            }
        }
        /// The range of a plain string's content (the opening quote at `offset`), or nil.
        func plainString() -> Range<Int>? {
            guard offset < end, bytes[offset] == UInt8(ascii: "\"") else { return nil }
            let start = offset + 1
            var index = start
            while index < end {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    offset = index + 1
                    return start..<index
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }

        skipWhitespace()
        guard offset < end, bytes[offset] == UInt8(ascii: "{") else { return nil }
        offset += 1
        var names: [Range<Int>] = []
        names.reserveCapacity(8)
        var members: [(name: String, value: String)] = []
        members.reserveCapacity(8)
        skipWhitespace()
        if offset < end, bytes[offset] == UInt8(ascii: "}") {
            offset += 1
        } else {
            while true {
                skipWhitespace()
                guard let name = plainString() else { return nil }
                skipWhitespace()
                guard offset < end, bytes[offset] == UInt8(ascii: ":") else { return nil }
                offset += 1
                skipWhitespace()
                guard let value = plainString() else { return nil }
                for seen in names where bytes[seen].elementsEqual(bytes[name]) { return nil }
                guard names.count < maximumMembers else { return nil }
                names.append(name)
                members.append((String(decoding: bytes[name], as: UTF8.self), String(decoding: bytes[value], as: UTF8.self)))
                skipWhitespace()
                guard offset < end else { return nil }
                if bytes[offset] == UInt8(ascii: ",") {
                    offset += 1
                } else if bytes[offset] == UInt8(ascii: "}") {
                    offset += 1
                    break
                } else {
                    return nil
                }
            }
        }
        skipWhitespace()
        return offset == end ? members : nil
    }
}
