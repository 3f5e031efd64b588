import AGConfig
import AGPolicy

/// Appends one flat JSON object to a string: the fast path for log lines and error envelopes.
///
/// Values are escaped per RFC 8259; keys are trusted literals from our own code.
public struct JSONObjectWriter {
    public private(set) var text = "{"
    private var first = true

    public init() {}

    public mutating func add(_ key: String, _ value: String) {
        addKey(key)
        Self.appendQuoted(value, to: &text)
    }

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        add(key, value)
    }

    public mutating func add(_ key: String, _ value: Int) {
        addKey(key)
        text += String(value)
    }

    public mutating func add(_ key: String, _ value: Double) {
        addKey(key)
        text += value.isFinite ? String(value) : "null"
    }

    public mutating func add(_ key: String, _ value: Bool) {
        addKey(key)
        text += value ? "true" : "false"
    }

    /// Adds an already-serialized JSON value.
    public mutating func add(_ key: String, rawJSON: String) {
        addKey(key)
        text += rawJSON
    }

    public func finished() -> String { text + "}" }

    private mutating func addKey(_ key: String) {
        if !first { text += "," }
        first = false
        text += "\""
        text += key
        text += "\":"
    }

    /// Appends `value` as a JSON string literal.
    public static func appendQuoted(_ value: String, to out: inout String) {
        out += "\""
        var needsEscape = false
        for byte in value.utf8 where byte < 0x20 || byte == 0x22 || byte == 0x5C {
            needsEscape = true
            break
        }
        if !needsEscape {
            out += value
        } else {
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case let c where c.value < 0x20:
                    let hex = String(c.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
