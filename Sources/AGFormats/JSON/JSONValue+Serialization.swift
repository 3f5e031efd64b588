extension JSONValue {
    /// Compact JSON text as UTF-8 bytes: no whitespace, object keys sorted, `/` not escaped,
    /// non-ASCII written as UTF-8. Non-finite doubles, which JSON cannot express, become `null`.
    public func serialized() -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(256)
        write(to: &output)
        return output
    }

    /// Compact JSON text (see `serialized()`).
    public func serializedString() -> String {
        String(decoding: serialized(), as: UTF8.self)
    }

    func write(to output: inout [UInt8]) {
        switch self {
        case .null:
            output.append(contentsOf: "null".utf8)
        case .bool(let value):
            output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value):
            output.append(contentsOf: String(value).utf8)
        case .double(let value):
            if !value.isFinite {
                output.append(contentsOf: "null".utf8)
            } else if value.rounded() == value, let exact = Int64(exactly: value) {
                output.append(contentsOf: String(exact).utf8)
            } else {
                output.append(contentsOf: value.description.utf8)
            }
        case .string(let value):
            Self.writeString(value, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                element.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                members[key]!.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Nearly every value needs no escaping: one scan over its bytes, then one copy of the
        // string's UTF-8 (iterating a `String.UTF8View` byte by byte costs several times more).
        if isClean(string.utf8.span) {
            output.appendUTF8(of: string)
        } else {
            writeEscaping(string.utf8.span, to: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    static func writeString(_ string: Substring, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        if isClean(string.utf8.span) {
            output.appendUTF8(of: string)
        } else {
            writeEscaping(string.utf8.span, to: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    /// No byte of `bytes` needs escaping (a branch-free pass).
    static func isClean(_ bytes: Span<UInt8>) -> Bool {
        var flagged: UInt8 = 0
        for index in 0..<bytes.count {
            let byte = bytes[index]
            flagged |= (byte < 0x20 ? 1 : 0) | (byte == UInt8(ascii: "\"") ? 1 : 0) | (byte == UInt8(ascii: "\\") ? 1 : 0)
        }
        return flagged == 0
    }

    private static func writeEscaping(_ bytes: Span<UInt8>, to output: inout [UInt8]) {
        for index in 0..<bytes.count {
            let byte = bytes[index]
            if needsEscape(byte) { writeEscaped(byte, to: &output) } else { output.append(byte) }
        }
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func writeEscaped(_ byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
        case 0x0A: output.append(UInt8(ascii: "n"))
        case 0x0D: output.append(UInt8(ascii: "r"))
        case 0x09: output.append(UInt8(ascii: "t"))
        default:
            output.append(contentsOf: "u00".utf8)
            output.append(hexDigits[Int(byte >> 4)])
            output.append(hexDigits[Int(byte & 0x0F)])
        }
    }
}
