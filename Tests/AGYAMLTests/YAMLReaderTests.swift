import Testing

@testable import AGYAML

/// The libyaml wrapper: node tree, locations and the YAML features it refuses.
@Suite struct ConfigYAMLReaderTests {
    /// A compact rendering of a tree: `{key@line:col=value}`, `[items]`, scalars with their style.
    static func render(_ node: YAMLNode?) -> String {
        guard let node else { return "nil" }
        switch node.content {
        case .scalar(let scalar):
            return scalar.isPlain ? scalar.text : "'\(scalar.text)'"
        case .sequence(let items):
            return "[" + items.map { render($0) }.joined(separator: ",") + "]"
        case .mapping(let entries):
            return "{" + entries.map {
                "\($0.key)@\($0.keyLocation.line):\($0.keyLocation.column)=\(render($0.value))"
            }.joined(separator: ",") + "}"
        }
    }

    static let documents: [(String, String)] = [
        ("", "nil"),
        ("# only a comment\n", "nil"),
        ("a: 1\nb:\n  - x\n  - 'y'\n", "{a@1:1=1,b@2:1=[x,'y']}"),
        ("---\nk: \"v\"\n...\n", "{k@2:1='v'}"),
        ("outer:\n  inner: {x: [1, 2]}\n", "{outer@1:1={inner@2:3={x@2:11=[1,2]}}}"),
        ("text: |\n  line one\n  line two\n", "{text@1:1='line one\nline two\n'}"),
        ("empty:\n", "{empty@1:1=}"),
        // A UTF-8 byte order mark before the document (allowed by YAML) is skipped; it was read
        // as content and refused as "did not find expected <document start>".
        ("\u{FEFF}a: 1\nb: 2\n", "{a@1:1=1,b@2:1=2}"),
    ]

    @Test(arguments: documents)
    func parsesTree(_ text: String, _ expected: String) throws {
        #expect(Self.render(try YAMLReader.parse(text, file: "t.yaml")) == expected)
    }

    static let refused: [(String, String)] = [
        ("a: 1\na: 2\n", #"t.yaml:2: duplicate key "a" (first defined at line 1)"#),
        ("base: &b {x: 1}\nother: *b\n", "t.yaml:1: YAML anchors (&name) are not supported"),
        ("other: *b\n", "t.yaml:1: YAML aliases (*name) are not supported"),
        ("a: !custom x\n", "t.yaml:1: YAML tags (!custom) are not supported"),
        ("? [a, b]\n: c\n", "t.yaml:1: mapping keys must be scalars"),
        ("a: 1\n---\nb: 2\n", "t.yaml:2: a second YAML document (---) is not supported; use one document per file"),
        ("a: [1, 2\n", "t.yaml:2: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 1)"),
        ("a:\n\tb: 1\n", "t.yaml:2: invalid YAML: found character that cannot start any token (while scanning for the next token at line 2)"),
        // A file that ends without a newline: libyaml puts its end on the next line, which the
        // file does not have (found by the config-gateway fuzz target).
        ("{", "t.yaml:1: invalid YAML: did not find expected node content (while parsing a flow node at line 1)"),
        ("a: [1,\n  2", "t.yaml:2: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line 1)"),
        (String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
         "t.yaml:1: nesting deeper than 64 levels is not supported"),
    ]

    @Test(arguments: refused)
    func refuses(_ text: String, _ expected: String) {
        do {
            let node = try YAMLReader.parse(text, file: "t.yaml")
            Issue.record("parsed: \(Self.render(node))")
        } catch {
            #expect("\(error.location.file):\(error.location.line): \(error.message)" == expected)
        }
    }

    @Test func acceptsMaximumDepth() throws {
        let text = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(try YAMLReader.parse(text, file: "t.yaml") != nil)
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: YAMLError.self) { try YAMLReader.parse([0x61, 0x3A, 0x20, 0xFF, 0xFE, 0x0A], file: "t.yaml") }
    }

    static let scalars: [(String, YAMLScalar.Style, YAMLScalar.Resolved)] = [
        ("", .plain, .null), ("~", .plain, .null), ("null", .plain, .null), ("true", .plain, .bool(true)),
        ("False", .plain, .bool(false)), ("yes", .plain, .string("yes")), ("42", .plain, .int(42)),
        ("-7", .plain, .int(-7)), ("0x1F", .plain, .string("0x1F")), ("1.5", .plain, .double(1.5)),
        ("1e3", .plain, .double(1000)), (".5", .plain, .double(0.5)), ("1.", .plain, .double(1)),
        ("99999999999999999999", .plain, .string("99999999999999999999")), ("42", .doubleQuoted, .string("42")),
        ("true", .singleQuoted, .string("true")), ("", .doubleQuoted, .string("")), ("1e", .plain, .string("1e")),
    ]

    @Test(arguments: scalars)
    func resolvesCoreSchema(_ text: String, _ style: YAMLScalar.Style, _ expected: YAMLScalar.Resolved) {
        #expect(YAMLScalar(text: text, style: style).resolved == expected)
    }
}
