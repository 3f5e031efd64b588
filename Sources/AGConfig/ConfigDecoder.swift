import AGYAML
import AGFormats
/// A value in the YAML tree together with its key path, ready to be decoded.
public struct ConfigField {
    public let node: YAMLNode
    public let path: ConfigKeyPath
    /// Line of the key that introduced the value (the value's own line for sequence items and roots).
    public let keyLine: Int

    public var line: Int { node.location.line }

    /// `true` for `key:` with nothing after it, `~` or `null`.
    public var isNull: Bool {
        if case .scalar(let scalar) = node.content, scalar.resolved == .null { return true }
        return false
    }
}

/// The keys of one YAML mapping, after unknown keys were reported.
public struct ConfigMapping {
    public let path: ConfigKeyPath
    /// Where "missing key" problems point: the line of the key that introduced the mapping.
    public let line: Int
    private let fields: [String: ConfigField]
    private let decoder: ConfigDecoder

    public init(path: ConfigKeyPath, line: Int, fields: [String: ConfigField], decoder: ConfigDecoder) {
        self.path = path
        self.line = line
        self.fields = fields
        self.decoder = decoder
    }

    /// The value of `key`, including explicit nulls.
    public func raw(_ key: String) -> ConfigField? { fields[key] }

    /// The value of `key`; `nil` when absent or null (the default applies).
    public subscript(_ key: String) -> ConfigField? {
        guard let field = fields[key], !field.isNull else { return nil }
        return field
    }

    /// The value of `key`, reporting it when absent or null.
    public func required(_ key: String) -> ConfigField? {
        guard let field = fields[key] else {
            decoder.report(line: line, path: path.key(key), "missing required key")
            return nil
        }
        guard !field.isNull else {
            decoder.report(line: field.keyLine, path: field.path, "missing value")
            return nil
        }
        return field
    }
}

/// Decodes the YAML tree of one file into typed values, collecting every problem instead of
/// stopping at the first, so one `check-config` run shows all of them.
///
/// Each `decode` function returns `nil` after reporting a problem; callers then fall back to
/// the default so decoding can continue, and the problem list decides the outcome.
public final class ConfigDecoder {
    public let file: String
    private(set) var problems: [ConfigProblem] = []

    public init(file: String) {
        self.file = file
    }

    public func report(line: Int?, path: ConfigKeyPath, _ message: String) {
        problems.append(ConfigProblem(file: file, line: line, keyPath: path.description, message: message))
    }

    public func report(_ field: ConfigField, _ message: String) {
        report(line: field.line, path: field.path, message)
    }

    // MARK: Structure

    /// The root of a document; an empty file is an empty mapping.
    public func rootMapping(_ root: YAMLNode?, allowed: [String]) -> ConfigMapping {
        guard let root else {
            return ConfigMapping(path: .root, line: 1, fields: [:], decoder: self)
        }
        let field = ConfigField(node: root, path: .root, keyLine: root.location.line)
        return mapping(field, allowed: allowed) ?? ConfigMapping(path: .root, line: 1, fields: [:], decoder: self)
    }

    /// A mapping whose keys must all be in `allowed`; unknown keys are reported with the allowed list.
    public func mapping(_ field: ConfigField, allowed: [String]) -> ConfigMapping? {
        guard case .mapping(let entries) = field.node.content else {
            report(field, "expected a mapping, got \(Self.describe(field.node))")
            return nil
        }
        var fields: [String: ConfigField] = [:]
        fields.reserveCapacity(entries.count)
        for entry in entries {
            let path = field.path.key(entry.key)
            guard allowed.contains(entry.key) else {
                var message = "unknown key"
                if let suggestion = Self.closest(to: entry.key, in: allowed) {
                    message += " (did you mean \(suggestion)?)"
                }
                report(line: entry.keyLocation.line, path: path, message + "; allowed keys: " + allowed.joined(separator: ", "))
                continue
            }
            fields[entry.key] = ConfigField(node: entry.value, path: path, keyLine: entry.keyLocation.line)
        }
        return ConfigMapping(path: field.path, line: field.keyLine, fields: fields, decoder: self)
    }

    /// A mapping with free-form keys (tiers, claim maps), in file order.
    public func entries(_ field: ConfigField) -> [(key: String, field: ConfigField)]? {
        guard case .mapping(let entries) = field.node.content else {
            report(field, "expected a mapping, got \(Self.describe(field.node))")
            return nil
        }
        return entries.map {
            ($0.key, ConfigField(node: $0.value, path: field.path.key($0.key), keyLine: $0.keyLocation.line))
        }
    }

    /// The items of a sequence.
    public func sequence(_ field: ConfigField) -> [ConfigField]? {
        guard case .sequence(let items) = field.node.content else {
            report(field, "expected a list, got \(Self.describe(field.node))")
            return nil
        }
        return items.enumerated().map {
            ConfigField(node: $1, path: field.path.index($0), keyLine: $1.location.line)
        }
    }

    // MARK: Scalars

    /// A non-empty string. Plain numbers are taken as written (a team ID may be all digits);
    /// booleans and nulls are refused.
    public func string(_ field: ConfigField) -> String? {
        guard case .scalar(let scalar) = field.node.content else {
            report(field, "expected a string, got \(Self.describe(field.node))")
            return nil
        }
        switch scalar.resolved {
        case .null, .bool:
            report(field, "expected a string, got \(Self.describe(field.node))")
            return nil
        default:
            guard !scalar.text.isEmpty else {
                report(field, "expected a non-empty string")
                return nil
            }
            return scalar.text
        }
    }

    public func bool(_ field: ConfigField) -> Bool? {
        if case .scalar(let scalar) = field.node.content, case .bool(let value) = scalar.resolved {
            return value
        }
        report(field, "expected true or false, got \(Self.describe(field.node))")
        return nil
    }

    /// A plain decimal integer within `range`.
    public func int(_ field: ConfigField, in range: ClosedRange<Int>) -> Int? {
        guard case .scalar(let scalar) = field.node.content, scalar.isPlain,
              YAMLScalar.isDecimalInteger(scalar.text)
        else {
            report(field, "expected an integer, got \(Self.describe(field.node))")
            return nil
        }
        guard let value = Int(scalar.text), range.contains(value) else {
            report(field, "expected an integer \(Self.describe(range)), got \(scalar.text)")
            return nil
        }
        return value
    }

    /// A number (integer or decimal) within `range`.
    public func double(_ field: ConfigField, in range: ClosedRange<Double>, rangeText: String) -> Double? {
        guard case .scalar(let scalar) = field.node.content else {
            report(field, "expected a number, got \(Self.describe(field.node))")
            return nil
        }
        let value: Double
        switch scalar.resolved {
        case .int(let int): value = Double(int)
        case .double(let double): value = double
        default:
            report(field, "expected a number, got \(Self.describe(field.node))")
            return nil
        }
        guard range.contains(value) else {
            report(field, "expected a number \(rangeText), got \(scalar.text)")
            return nil
        }
        return value
    }

    /// One of an enum's raw values, e.g. `expected one of required, none, got "maybe"`.
    public func oneOf<Value: RawRepresentable & CaseIterable>(_ field: ConfigField, _: Value.Type) -> Value?
    where Value.RawValue == String {
        if case .scalar(let scalar) = field.node.content, let value = Value(rawValue: scalar.text) {
            return value
        }
        let names = Value.allCases.map(\.rawValue).joined(separator: ", ")
        report(field, "expected one of \(names), got \(Self.describe(field.node))")
        return nil
    }

    /// The longest duration any setting takes: ten years. Longer ones mean nothing here, and
    /// arithmetic on them (a challenge key kept twice its lifetime, an expiry in microseconds)
    /// could overflow at run time.
    public static let maximumDuration = Duration.seconds(3650 * 86_400)

    /// A duration such as `250ms` or `7d`, at most `maximumDuration`; zero only when
    /// `allowZero` (`0s`).
    public func duration(_ field: ConfigField, allowZero: Bool = false) -> Duration? {
        guard case .scalar(let scalar) = field.node.content, let value = ConfigUnits.parseDuration(scalar.text) else {
            var message = "expected a duration like \(ConfigUnits.durationExamples), got \(Self.describe(field.node))"
            if case .scalar(let scalar) = field.node.content, YAMLScalar.isDecimalInteger(scalar.text) {
                message += " (add a unit)"
            }
            report(field, message)
            return nil
        }
        guard allowZero || value > .zero else {
            report(field, "must be greater than zero")
            return nil
        }
        guard value <= Self.maximumDuration else {
            report(field, "must be at most 3650d (ten years)")
            return nil
        }
        return value
    }

    /// A byte size such as `1048576` or `64KiB`, at least 1.
    public func byteSize(_ field: ConfigField) -> Int? {
        guard case .scalar(let scalar) = field.node.content, let value = ConfigUnits.parseByteSize(scalar.text) else {
            var message = "expected a size like \(ConfigUnits.sizeExamples), got \(Self.describe(field.node))"
            if case .scalar(let scalar) = field.node.content,
               ["KB", "MB", "GB", "TB", "K", "M", "G", "k", "kB"].contains(where: { scalar.text.hasSuffix($0) }) {
                message += " (units are binary: KiB, MiB, GiB)"
            }
            report(field, message)
            return nil
        }
        guard value > 0 else {
            report(field, "must be greater than zero")
            return nil
        }
        return value
    }

    // MARK: Rendering

    /// How a node appears in messages: quoted strings, bare numbers and booleans, kinds for collections.
    public static func describe(_ node: YAMLNode) -> String {
        switch node.content {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .scalar(let scalar):
            switch scalar.resolved {
            case .null: return "null"
            case .bool(let value): return String(value)
            case .int, .double: return scalar.text
            case .string(let text): return quoted(text)
            }
        }
    }

    /// A string in double quotes with quotes, backslashes and control characters escaped.
    public static func quoted(_ text: String) -> String {
        JSONValue.string(text).serializedString()
    }

    private static func describe(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == Int.max { return "of at least \(range.lowerBound)" }
        return "from \(range.lowerBound) to \(range.upperBound)"
    }

    /// The allowed key within edit distance 2 of `key`, for "did you mean" hints.
    public static func closest(to key: String, in candidates: [String]) -> String? {
        let best = candidates.map { ($0, editDistance(key, $0)) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= 2, best.1 < key.count else { return nil }
        return best.0
    }

    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1,
                                 previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}
