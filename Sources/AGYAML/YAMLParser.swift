internal import CYAML

/// Owns one libyaml event parser reading from a caller-owned buffer.
///
/// The only type that touches libyaml. Events are copied into `YAMLEvent` values at once, so no
/// libyaml pointer escapes `next()`.
private final class LibYAMLEventParser {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let file: String
    /// Lines in the input (a last line without a newline counts). libyaml puts the end of a
    /// stream that does not end in a newline on the line after it; a location never names a
    /// line the file does not have.
    private let lineCount: Int

    /// `input` must be non-empty and stay valid for the lifetime of the parser: callers create and
    /// drop the parser inside `withUnsafeBufferPointer`.
    init(input: UnsafeBufferPointer<UInt8>, file: String) throws(YAMLError) {
        self.file = file
        lineCount = input.count { $0 == 0x0A } + 1
        parser = .allocate(capacity: 1)
        guard yaml_parser_initialize(parser) == 1 else {
            parser.deallocate()
            throw YAMLError(location: YAMLLocation(file: file, line: 1, column: 1),
                            message: "could not initialize the YAML parser (out of memory)")
        }
        if let base = input.baseAddress {
            // A UTF-8 byte order mark (editors on Windows write one) is allowed by YAML; with the
            // encoding set below libyaml would read it as content, so it is skipped here.
            let bom = input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF ? 3 : 0
            yaml_parser_set_input_string(parser, base + bom, input.count - bom)
        }
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    /// The next event, or the libyaml error (with its line) when the input is not valid YAML.
    func next() throws(YAMLError) -> YAMLEvent {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else {
            throw syntaxError()
        }
        defer { yaml_event_delete(&event) }
        let location = YAMLLocation(file: file,
                                    line: line(event.start_mark),
                                    column: Int(event.start_mark.column) + 1)
        switch event.type {
        case YAML_STREAM_START_EVENT:
            return YAMLEvent(kind: .streamStart, location: location)
        case YAML_STREAM_END_EVENT:
            return YAMLEvent(kind: .streamEnd, location: location)
        case YAML_DOCUMENT_START_EVENT:
            return YAMLEvent(kind: .documentStart, location: location)
        case YAML_DOCUMENT_END_EVENT:
            return YAMLEvent(kind: .documentEnd, location: location)
        case YAML_ALIAS_EVENT:
            return YAMLEvent(kind: .alias, location: location)
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: Int(scalar.length)),
                              as: UTF8.self)
            return YAMLEvent(kind: .scalar(YAMLScalar(text: text, style: Self.style(scalar.style))),
                             location: location,
                             hasAnchor: scalar.anchor != nil,
                             tag: scalar.tag.map { String(cString: $0) })
        case YAML_SEQUENCE_START_EVENT:
            let start = event.data.sequence_start
            return YAMLEvent(kind: .sequenceStart, location: location,
                             hasAnchor: start.anchor != nil, tag: start.tag.map { String(cString: $0) })
        case YAML_SEQUENCE_END_EVENT:
            return YAMLEvent(kind: .sequenceEnd, location: location)
        case YAML_MAPPING_START_EVENT:
            let start = event.data.mapping_start
            return YAMLEvent(kind: .mappingStart, location: location,
                             hasAnchor: start.anchor != nil, tag: start.tag.map { String(cString: $0) })
        case YAML_MAPPING_END_EVENT:
            return YAMLEvent(kind: .mappingEnd, location: location)
        default:
            throw YAMLError(location: location, message: "unexpected YAML event \(event.type.rawValue)")
        }
    }

    private func syntaxError() -> YAMLError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "malformed document"
        let column = Int(state.problem_mark.column) + 1
        var message = "invalid YAML: \(problem)"
        if let context = state.context.map({ String(cString: $0) }) {
            message += " (\(context) at line \(line(state.context_mark)))"
        }
        return YAMLError(location: YAMLLocation(file: file, line: line(state.problem_mark), column: column), message: message)
    }

    /// The 1-based line of `mark`, within the input.
    private func line(_ mark: yaml_mark_t) -> Int {
        min(Int(mark.line) + 1, lineCount)
    }

    private static func style(_ style: yaml_scalar_style_t) -> YAMLScalar.Style {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: return .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: return .literal
        case YAML_FOLDED_SCALAR_STYLE: return .folded
        default: return .plain
        }
    }
}

/// A libyaml event copied into Swift values.
struct YAMLEvent: Sendable {
    enum Kind: Sendable {
        case streamStart, streamEnd, documentStart, documentEnd, alias
        case scalar(YAMLScalar)
        case sequenceStart, sequenceEnd, mappingStart, mappingEnd
    }

    let kind: Kind
    let location: YAMLLocation
    var hasAnchor = false
    var tag: String? = nil
}

/// Parses one YAML document into a `YAMLNode` tree.
///
/// Configuration YAML is deliberately plain: anchors, aliases and tags are refused (aliases make
/// "billion laughs" documents possible and hide where a value came from), keys must be scalars
/// and unique within their mapping, only one document per file, and nesting is bounded.
public enum YAMLReader {
    /// Deepest nesting of sequences and mappings accepted.
    public static let maximumDepth = 64

    /// The root node, or `nil` for a file holding no document at all (empty or only comments).
    public static func parse(_ bytes: [UInt8], file: String) throws(YAMLError) -> YAMLNode? {
        guard !bytes.isEmpty else { return nil }
        let result: Result<YAMLNode?, YAMLError> = bytes.withUnsafeBufferPointer { buffer in
            do throws(YAMLError) {
                let parser = try LibYAMLEventParser(input: buffer, file: file)
                var builder = YAMLTreeBuilder()
                while true {
                    let event = try parser.next()
                    if try builder.consume(event) { break }
                }
                return .success(builder.root)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Convenience for tests and inline documents.
    public static func parse(_ text: String, file: String) throws(YAMLError) -> YAMLNode? {
        try parse(Array(text.utf8), file: file)
    }
}

/// Turns the event stream into a tree with an explicit stack, so depth is checked, not recursed.
private struct YAMLTreeBuilder {
    /// A collection being filled; a class so appends mutate in place instead of copying arrays.
    private final class OpenCollection {
        let location: YAMLLocation
        let isMapping: Bool
        var items: [YAMLNode] = []
        var entries: [YAMLMappingEntry] = []
        var pendingKey: (text: String, location: YAMLLocation)?
        var keyLines: [String: Int] = [:]

        init(location: YAMLLocation, isMapping: Bool) {
            self.location = location
            self.isMapping = isMapping
        }

        var node: YAMLNode {
            YAMLNode(content: isMapping ? .mapping(entries) : .sequence(items), location: location)
        }
    }

    private var stack: [OpenCollection] = []
    private var documents = 0
    private(set) var root: YAMLNode?

    /// Feeds one event; returns `true` at the end of the stream.
    mutating func consume(_ event: YAMLEvent) throws(YAMLError) -> Bool {
        switch event.kind {
        case .streamStart, .documentEnd:
            return false
        case .streamEnd:
            return true
        case .documentStart:
            documents += 1
            if documents > 1 {
                throw YAMLError(location: event.location,
                                message: "a second YAML document (---) is not supported; use one document per file")
            }
            return false
        case .alias:
            throw YAMLError(location: event.location, message: "YAML aliases (*name) are not supported")
        case .scalar(let scalar):
            try checkPlain(event)
            try attach(YAMLNode(content: .scalar(scalar), location: event.location))
        case .sequenceStart, .mappingStart:
            try checkPlain(event)
            guard stack.count < YAMLReader.maximumDepth else {
                throw YAMLError(location: event.location,
                                message: "nesting deeper than \(YAMLReader.maximumDepth) levels is not supported")
            }
            if case .mappingStart = event.kind {
                stack.append(OpenCollection(location: event.location, isMapping: true))
            } else {
                stack.append(OpenCollection(location: event.location, isMapping: false))
            }
        case .sequenceEnd, .mappingEnd:
            guard let collection = stack.popLast() else {
                throw YAMLError(location: event.location, message: "invalid YAML: unbalanced collection end")
            }
            try attach(collection.node)
        }
        return false
    }

    private func checkPlain(_ event: YAMLEvent) throws(YAMLError) {
        if event.hasAnchor {
            throw YAMLError(location: event.location, message: "YAML anchors (&name) are not supported")
        }
        if let tag = event.tag {
            throw YAMLError(location: event.location, message: "YAML tags (\(tag)) are not supported")
        }
    }

    private mutating func attach(_ node: YAMLNode) throws(YAMLError) {
        guard let parent = stack.last else {
            root = node
            return
        }
        guard parent.isMapping else {
            parent.items.append(node)
            return
        }
        if let key = parent.pendingKey {
            parent.entries.append(YAMLMappingEntry(key: key.text, keyLocation: key.location, value: node))
            parent.pendingKey = nil
            return
        }
        guard case .scalar(let scalar) = node.content else {
            throw YAMLError(location: node.location, message: "mapping keys must be scalars")
        }
        if let firstLine = parent.keyLines[scalar.text] {
            throw YAMLError(location: node.location,
                            message: "duplicate key \"\(scalar.text)\" (first defined at line \(firstLine))")
        }
        parent.keyLines[scalar.text] = node.location.line
        parent.pendingKey = (scalar.text, node.location)
    }
}
