import AGFormats

/// Why a form body was refused.
public struct FormError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// An `application/x-www-form-urlencoded` body.
///
/// `name=value` pairs joined by `&`, split as the WHATWG URL Standard (section 5.1) splits
/// them: empty pieces (`&&`, a leading or trailing `&`) are skipped, a piece without `=` is a
/// name with an empty value. `+` is a space and `%XX` (two hex digits, either case) a byte; the
/// decoded names and values must be UTF-8. Refused rather than guessed where the standard
/// guesses: a `%` not followed by two hex digits (kept as it stands there), raw spaces, control
/// or non-ASCII bytes; and a name given twice (so a proxy and the gateway can never read
/// different values), and more than `maximumFields` pairs.
public struct URLEncodedForm: Sendable, Equatable {
    /// Every field by decoded name.
    public let fields: [String: String]

    /// Parses `body` in one pass over its bytes (concrete `[UInt8]` indices: a generic
    /// collection here ran unspecialised across the module boundary, a tenth of a refresh).
    public init(parsing body: [UInt8], maximumFields: Int = 32) throws(FormError) {
        var fields: [String: String] = [:]
        guard !body.isEmpty else {
            self.fields = fields
            return
        }
        var start = 0
        while start <= body.count {
            var end = start
            var equals: Int?
            while end < body.count, body[end] != UInt8(ascii: "&") {
                if equals == nil, body[end] == UInt8(ascii: "=") { equals = end }
                end += 1
            }
            defer { start = end + 1 }
            guard end > start else { continue }
            guard fields.count < maximumFields else { throw FormError("more than \(maximumFields) fields") }
            let name = try Self.decode(body, start..<(equals ?? end))
            let value = try equals.map { equals throws(FormError) in try Self.decode(body, equals + 1..<end) } ?? ""
            guard fields[name] == nil else { throw FormError("field \(name) given more than once") }
            fields[name] = value
        }
        self.fields = fields
    }

    /// The value of field `name`, if present.
    public subscript(name: String) -> String? { fields[name] }

    /// The decoded text of `bytes[range]`.
    private static func decode(_ bytes: [UInt8], _ range: Range<Int>) throws(FormError) -> String {
        var decoded = [UInt8]()
        decoded.reserveCapacity(range.count)
        var index = range.lowerBound
        while index < range.upperBound {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "+"):
                decoded.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard index + 2 < range.upperBound, let upper = PercentEncoding.hexValue(bytes[index + 1]), let lower = PercentEncoding.hexValue(bytes[index + 2]) else {
                    throw FormError("% not followed by two hex digits")
                }
                decoded.append(upper << 4 | lower)
                index += 2
            case 0x21...0x7E:
                decoded.append(byte)
            default:
                throw FormError("raw space, control or non-ASCII byte (encode it as %XX)")
            }
            index += 1
        }
        guard let text = String(validating: decoded, as: UTF8.self) else { throw FormError("a field is not UTF-8") }
        return text
    }

}
