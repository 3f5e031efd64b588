/// Where a YAML node starts: file as given to the reader, 1-based line and column.
public struct YAMLLocation: Sendable, Hashable {
    public let file: String
    public let line: Int
    public let column: Int
}

/// A scalar exactly as written; `style` tells whether plain-scalar type resolution applies.
public struct YAMLScalar: Sendable, Hashable {
    public enum Style: Sendable, Hashable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    public let text: String
    public let style: Style

    /// Only plain scalars can be `null`, booleans or numbers; quoted and block scalars are strings.
    public var isPlain: Bool { style == .plain }
}

/// One `key: value` pair of a mapping; keys are always scalars.
public struct YAMLMappingEntry: Sendable {
    public let key: String
    public let keyLocation: YAMLLocation
    public let value: YAMLNode
}

/// A parsed YAML node: a scalar, a sequence or a mapping (entries in file order, keys unique).
public struct YAMLNode: Sendable {
    public enum Content: Sendable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        case mapping([YAMLMappingEntry])
    }

    public let content: Content
    public let location: YAMLLocation
}

/// A document that could not be parsed, or that uses a YAML feature the configuration refuses.
public struct YAMLError: Error, Sendable, Hashable {
    public let location: YAMLLocation
    public let message: String
}
