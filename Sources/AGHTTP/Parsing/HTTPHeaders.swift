/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// Order and duplicates are kept as received, because a proxy must forward them faithfully.
public struct HTTPHeaders: Sendable, Sequence {
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// The first value of `name`, if any.
    public subscript(name: String) -> String? {
        for field in fields where field.name.equalsIgnoringASCIICase(name) {
            return field.value
        }
        return nil
    }

    /// Whether a field here is named `fields.storage[range]`, ASCII case-insensitively (by
    /// index, so that no field is copied: this runs for every upstream response field).
    public func containsName(_ range: Range<Int>, of other: HTTPFields) -> Bool {
        for index in fields.indices where other.equalsIgnoringCase(range, fields[index].name) { return true }
        return false
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    /// Room for `count` fields in all, so that adding them allocates once.
    public mutating func reserveCapacity(_ count: Int) {
        fields.reserveCapacity(count)
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Removes every field called `name` and adds one with `value`: replace, never append.
    public mutating func replace(_ name: String, _ value: String) {
        remove(name)
        fields.append((name, value))
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }

    public mutating func removeAll(where shouldRemove: (String) -> Bool) {
        fields.removeAll { shouldRemove($0.name) }
    }

    /// True when a comma-separated header (`Connection`, `Transfer-Encoding`) lists `token`.
    public func containsToken(_ token: String, in name: String) -> Bool {
        for value in values(name) {
            for part in value.split(separator: ",") where part.trimmingASCIISpaces().equalsIgnoringASCIICase(token) {
                return true
            }
        }
        return false
    }
}

extension StringProtocol {
    /// ASCII case-insensitive comparison without allocating.
    @inlinable
    public func equalsIgnoringASCIICase<S: StringProtocol>(_ other: S) -> Bool {
        let a = self.utf8, b = other.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }

    public func trimmingASCIISpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
