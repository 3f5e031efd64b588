/// A JSON-like value from the configuration, e.g. a tenant's static `custom_claims`.
public enum ConfigValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    /// Always finite: the decoder refuses `.inf` and `.nan`, which JSON cannot carry.
    case double(Double)
    case string(String)
    case array([ConfigValue])
    case object([String: ConfigValue])

    /// Compact JSON with object keys sorted, so equal values always render identically.
    public var jsonText: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null:
            output += "null"
        case .bool(let value):
            output += value ? "true" : "false"
        case .int(let value):
            output += String(value)
        case .double(let value):
            // Swift's shortest round-trip form is valid JSON for finite values ("1.5", "1e-07").
            output += value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) + ".0" : "\(value)"
        case .string(let value):
            Self.writeString(value, to: &output)
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output += "," }
                Self.writeString(key, to: &output)
                output += ":"
                members[key]!.write(to: &output)
            }
            output += "}"
        }
    }

    private static func writeString(_ value: String, to output: inout String) {
        output += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case _ where scalar.value < 0x20 || scalar == "\u{2028}" || scalar == "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
