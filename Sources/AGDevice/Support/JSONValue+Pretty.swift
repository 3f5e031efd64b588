public import AGFormats

extension JSONValue {
    /// Indented JSON for people: two spaces per level, object keys sorted, scalars written as
    /// `serializedString()` writes them.
    public func prettyPrinted() -> String {
        prettyPrinted(keySeparator: ": ", indent: "")
    }

    /// Indented JSON with `keySeparator` between a key and its value (`" : "` is how Apple's
    /// `JSONSerialization` pretty-prints), starting at `indent` (for values nested in an outer
    /// document written by the caller).
    public func prettyPrinted(keySeparator: String, indent: String) -> String {
        var output = ""
        writePretty(to: &output, indent: indent, keySeparator: keySeparator)
        return output
    }

    /// An object written in the given member order (Apple's encoder has one; `JSONValue`
    /// objects are unordered), members pretty-printed the same way.
    public static func prettyPrintedObject(_ members: [(String, JSONValue)], keySeparator: String) -> String {
        guard !members.isEmpty else { return "{}" }
        let lines = members.map { name, value in
            "  " + JSONValue.string(name).serializedString() + keySeparator
                + value.prettyPrinted(keySeparator: keySeparator, indent: "  ")
        }
        return "{\n" + lines.joined(separator: ",\n") + "\n}"
    }

    private func writePretty(to output: inout String, indent: String, keySeparator: String) {
        let inner = indent + "  "
        switch self {
        case .array(let elements) where !elements.isEmpty:
            output += "[\n"
            for (index, element) in elements.enumerated() {
                output += inner
                element.writePretty(to: &output, indent: inner, keySeparator: keySeparator)
                output += index == elements.count - 1 ? "\n" : ",\n"
            }
            output += indent + "]"
        case .object(let members) where !members.isEmpty:
            output += "{\n"
            let keys = members.keys.sorted()
            for (index, key) in keys.enumerated() {
                output += inner + JSONValue.string(key).serializedString() + keySeparator
                members[key]!.writePretty(to: &output, indent: inner, keySeparator: keySeparator)
                output += index == keys.count - 1 ? "\n" : ",\n"
            }
            output += indent + "}"
        default:
            output += serializedString()
        }
    }
}
