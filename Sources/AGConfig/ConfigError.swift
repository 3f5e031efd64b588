import AGYAML
/// One thing wrong with the configuration, located in a file.
///
/// Renders as `file:line: key.path: what is wrong`; the line is left out when a problem concerns
/// a whole file (unreadable, missing directory), the key path when it concerns no key (YAML syntax).
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    public let file: String
    /// 1-based; `nil` when the problem is about the file itself.
    public let line: Int?
    /// Dotted key path with sequence indices, e.g. `routes[1].auth`; empty when there is none.
    public let keyPath: String
    public let message: String

    public init(file: String, line: Int?, keyPath: String, message: String) {
        self.file = file
        self.line = line
        self.keyPath = keyPath
        self.message = message
    }

    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        text += ": "
        if !keyPath.isEmpty { text += keyPath + ": " }
        return text + message
    }
}

/// The configuration was rejected; `problems` lists everything found, in file and line order.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    public let problems: [ConfigProblem]

    public init(problems: [ConfigProblem]) {
        self.problems = problems
    }

    /// One line per problem.
    public var lines: [String] { problems.map(\.description) }

    public var description: String { lines.joined(separator: "\n") }
}
