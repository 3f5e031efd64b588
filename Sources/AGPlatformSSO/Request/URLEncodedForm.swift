/// Why a form body was refused.
public struct FormError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// An `application/x-www-form-urlencoded` body, parsed strictly.
///
/// `name=value` pairs joined by `&`; `+` is a space and `%XX` (two hex digits, either case) a
/// byte; the decoded names and values must be UTF-8. Refused rather than guessed: a `%` not
/// followed by two hex digits, a pair without `=`, an empty name, an empty pair (`&&`, a
/// leading or trailing `&`), raw spaces, control or non-ASCII bytes, a name given twice (so a
/// proxy and the gateway can never read different values), and more than `maximumFields` pairs.
public struct URLEncodedForm: Sendable, Equatable {
    /// Every field by decoded name.
    public let fields: [String: String]

    public init(parsing body: some Collection<UInt8>, maximumFields: Int = 32) throws(FormError) {
        var fields: [String: String] = [:]
        guard !body.isEmpty else {
            self.fields = fields
            return
        }
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            guard !pair.isEmpty else { throw FormError("empty field (a stray &)") }
            guard fields.count < maximumFields else { throw FormError("more than \(maximumFields) fields") }
            guard let equals = pair.firstIndex(of: UInt8(ascii: "=")) else {
                throw FormError("field without =")
            }
            let name = try Self.decode(pair[pair.startIndex..<equals])
            guard !name.isEmpty else { throw FormError("field with an empty name") }
            let value = try Self.decode(pair[pair.index(after: equals)...])
            guard fields[name] == nil else { throw FormError("field \(name) given more than once") }
            fields[name] = value
        }
        self.fields = fields
    }

    /// The value of field `name`, if present.
    public subscript(name: String) -> String? { fields[name] }

    private static func decode(_ encoded: some Collection<UInt8>) throws(FormError) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(encoded.count)
        var index = encoded.startIndex
        while index != encoded.endIndex {
            let byte = encoded[index]
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                let high = encoded.index(after: index)
                guard high != encoded.endIndex, let upper = hexValue(encoded[high]) else {
                    throw FormError("% not followed by two hex digits")
                }
                let low = encoded.index(after: high)
                guard low != encoded.endIndex, let lower = hexValue(encoded[low]) else {
                    throw FormError("% not followed by two hex digits")
                }
                bytes.append(upper << 4 | lower)
                index = low
            case 0x21...0x7E:
                bytes.append(byte)
            default:
                throw FormError("raw space, control or non-ASCII byte (encode it as %XX)")
            }
            index = encoded.index(after: index)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw FormError("a field is not UTF-8") }
        return text
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
