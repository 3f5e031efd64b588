/// Why JSON text was refused; `offset` is the byte position of the problem.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses exactly one JSON value (RFC 8259, strict: no comments, no trailing commas, no
    /// leading zeros, no lone surrogates, no duplicate object keys, no trailing garbage) with
    /// nesting limited to `maximumDepth`.
    public init<D: Sequence>(parsing utf8: D, maximumDepth: Int = 64) throws(JSONParseError) where D.Element == UInt8 {
        let bytes = utf8 as? [UInt8] ?? Array(utf8)
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.offset == bytes.count else { throw parser.error("unexpected data after the value") }
        self = value
    }

    /// Parses JSON text given as a string.
    public init(parsing text: String, maximumDepth: Int = 64) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8), maximumDepth: maximumDepth)
    }
}

/// A cursor over the input; every read is bounds-checked by the array itself as well.
private struct JSONParser {
    let bytes: [UInt8]
    let maximumDepth: Int
    var offset = 0

    init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    func error(_ reason: String) -> JSONParseError {
        JSONParseError(offset: offset, reason: reason)
    }

    var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
            offset += 1
        }
    }

    mutating func expect(_ literal: String) throws(JSONParseError) {
        let utf8 = literal.utf8
        guard utf8.count <= bytes.count - offset,
              bytes[offset..<(offset + utf8.count)].elementsEqual(utf8) else { throw error("invalid literal") }
        offset += utf8.count
    }

    mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
        guard let byte = current else { throw error("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character")
        }
    }

    mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < maximumDepth else { throw error("nesting too deep") }
        offset += 1
        var members = [String: JSONValue]()
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            offset += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let keyOffset = offset
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':'") }
            offset += 1
            skipWhitespace()
            let member = try value(depth: depth + 1)
            guard members.updateValue(member, forKey: key) == nil else {
                throw JSONParseError(offset: keyOffset, reason: "duplicate member name")
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "}"): offset += 1; return .object(members)
            default: throw error("expected ',' or '}'")
            }
        }
    }

    mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < maximumDepth else { throw error("nesting too deep") }
        offset += 1
        var elements = [JSONValue]()
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            offset += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "]"): offset += 1; return .array(elements)
            default: throw error("expected ',' or ']'")
            }
        }
    }

    mutating func digits() -> Int {
        let start = offset
        while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { offset += 1 }
        return offset - start
    }

    mutating func number() throws(JSONParseError) -> JSONValue {
        let start = offset
        if current == UInt8(ascii: "-") { offset += 1 }
        let integerStart = offset
        let integerDigits = digits()
        guard integerDigits > 0 else { throw error("expected a digit") }
        guard !(integerDigits > 1 && bytes[integerStart] == UInt8(ascii: "0")) else {
            throw JSONParseError(offset: integerStart, reason: "leading zero")
        }
        var isInteger = true
        if current == UInt8(ascii: ".") {
            isInteger = false
            offset += 1
            guard digits() > 0 else { throw error("expected a digit after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            offset += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard digits() > 0 else { throw error("expected an exponent digit") }
        }
        let text = String(decoding: bytes[start..<offset], as: UTF8.self)
        if isInteger, let integer = Int64(text) {
            return .integer(integer)
        }
        guard let double = Double(text), double.isFinite else {
            throw JSONParseError(offset: start, reason: "number out of range")
        }
        return .double(double)
    }

    mutating func hexQuad() throws(JSONParseError) -> UInt16 {
        guard bytes.count - offset >= 4 else { throw error("truncated \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt16(digit)
            offset += 1
        }
        return value
    }

    mutating func string() throws(JSONParseError) -> String {
        offset += 1
        let start = offset
        // Fast path: no escapes, so the text is a slice of the input (validated as UTF-8).
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 {
            offset += 1
        }
        if current == UInt8(ascii: "\"") {
            guard let text = String(validating: bytes[start..<offset], as: UTF8.self) else {
                throw JSONParseError(offset: start, reason: "invalid UTF-8")
            }
            offset += 1
            return text
        }
        var utf8 = Array(bytes[start..<offset])
        while true {
            guard let byte = current else { throw error("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                offset += 1
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "invalid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                offset += 1
                guard let escape = current else { throw error("unterminated escape") }
                offset += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try unicodeEscape()
                    utf8.append(contentsOf: String(Character(scalar)).utf8)
                default: throw error("invalid escape")
                }
            case 0x00..<0x20:
                throw error("control character in string")
            default:
                utf8.append(byte)
                offset += 1
            }
        }
    }

    /// The scalar of a `\uXXXX` escape (the `\u` already consumed), joining surrogate pairs.
    mutating func unicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try hexQuad()
        switch first {
        case 0xD800...0xDBFF:
            guard bytes.count - offset >= 2, bytes[offset] == UInt8(ascii: "\\"),
                  bytes[offset + 1] == UInt8(ascii: "u") else { throw error("lone high surrogate") }
            offset += 2
            let second = try hexQuad()
            guard (0xDC00...0xDFFF).contains(second) else { throw error("invalid low surrogate") }
            let value = 0x10000 + (UInt32(first - 0xD800) << 10) + UInt32(second - 0xDC00)
            return Unicode.Scalar(value)!
        case 0xDC00...0xDFFF:
            throw error("lone low surrogate")
        default:
            return Unicode.Scalar(first)!
        }
    }
}
