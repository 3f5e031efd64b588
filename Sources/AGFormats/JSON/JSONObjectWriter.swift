/// Writes one flat JSON object straight into bytes: the fast path for log lines, error
/// envelopes and small responses, where building a `JSONValue` tree first would only cost.
///
/// Values are escaped exactly as `JSONValue.serialized()` escapes them (one shared routine);
/// keys are trusted literals from our own code. Members keep the order they are added in.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var first = true

    public init() {
        bytes.reserveCapacity(256)
    }

    public mutating func add(_ key: String, _ value: String) {
        addKey(key)
        JSONValue.writeString(value, to: &bytes)
    }

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        add(key, value)
    }

    public mutating func add(_ key: String, _ value: Int) {
        addKey(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func add(_ key: String, _ value: Double) {
        addKey(key)
        bytes.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        addKey(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Adds an already-serialized JSON value.
    public mutating func add(_ key: String, rawJSON: String) {
        addKey(key)
        bytes.append(contentsOf: rawJSON.utf8)
    }

    /// Adds a `JSONValue` (an object or array member, say).
    public mutating func add(_ key: String, _ value: JSONValue) {
        addKey(key)
        value.write(to: &bytes)
    }

    /// The object's UTF-8 bytes.
    public func finishedBytes() -> [UInt8] { bytes + [UInt8(ascii: "}")] }

    /// The object as text.
    public func finished() -> String { String(decoding: finishedBytes(), as: UTF8.self) }

    private mutating func addKey(_ key: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: key.utf8)
        bytes.append(contentsOf: "\":".utf8)
    }
}
