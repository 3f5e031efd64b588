/// Where a YAML node starts: file as given to the reader, 1-based line and column.
struct YAMLLocation: Sendable, Hashable {
    let file: String
    let line: Int
    let column: Int
}

/// A scalar exactly as written; `style` tells whether plain-scalar type resolution applies.
struct YAMLScalar: Sendable, Hashable {
    enum Style: Sendable, Hashable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    let text: String
    let style: Style

    /// Only plain scalars can be `null`, booleans or numbers; quoted and block scalars are strings.
    var isPlain: Bool { style == .plain }
}

/// One `key: value` pair of a mapping; keys are always scalars.
struct YAMLMappingEntry: Sendable {
    let key: String
    let keyLocation: YAMLLocation
    let value: YAMLNode
}

/// A parsed YAML node: a scalar, a sequence or a mapping (entries in file order, keys unique).
struct YAMLNode: Sendable {
    enum Content: Sendable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        case mapping([YAMLMappingEntry])
    }

    let content: Content
    let location: YAMLLocation
}

/// A document that could not be parsed, or that uses a YAML feature the configuration refuses.
struct YAMLError: Error, Sendable, Hashable {
    let location: YAMLLocation
    let message: String
}
