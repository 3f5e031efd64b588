extension YAMLScalar {
    /// A scalar typed by the YAML 1.2 core schema (decimal integers only; no octal or hex).
    public enum Resolved: Sendable, Hashable {
        case null
        case bool(Bool)
        case int(Int)
        case double(Double)
        case string(String)
    }

    /// The value of this scalar under the core schema. Plain integers too large for `Int` stay strings,
    /// so callers asking for an integer can say "out of range" instead of "not a number".
    public var resolved: Resolved {
        guard isPlain else { return .string(text) }
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .double(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .double(-.infinity)
        case ".nan", ".NaN", ".NAN": return .double(.nan)
        default: break
        }
        if Self.isDecimalInteger(text) {
            return Int(text).map(Resolved.int) ?? .string(text)
        }
        if Self.isDecimalFloat(text), let value = Double(text) {
            return .double(value)
        }
        return .string(text)
    }

    /// `[-+]?[0-9]+`
    public static func isDecimalInteger(_ text: String) -> Bool {
        var bytes = Substring(text).utf8[...]
        if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            bytes = bytes.dropFirst()
        }
        return !bytes.isEmpty && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
    public static func isDecimalFloat(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var index = 0
        func digits() -> Int {
            let start = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            return index - start
        }
        func sign() {
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
                index += 1
            }
        }
        sign()
        var mantissaDigits = digits()
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            mantissaDigits += digits()
        }
        guard mantissaDigits > 0 else { return false }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            sign()
            guard digits() > 0 else { return false }
        }
        return index == bytes.count
    }
}
