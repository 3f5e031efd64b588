import AGConfig
import AGFormats

/// Turns verified claims into the header fields a tenant's `forward.claims` asks for.
///
/// Pure: the same claims always give the same fields, so the result is computed once per
/// token and kept with it in the token cache.
public struct ClaimHeaderMapper: Sendable {
    public let claims: [ClaimHeader]

    public init(claims: [ClaimHeader]) {
        self.claims = claims
    }

    /// One field per mapped claim present in `payload`, in configuration order. Missing and
    /// null claims give no field; strings go as they are, numbers and booleans as JSON text,
    /// objects and arrays as compact JSON.
    public func headers(for payload: [String: JSONValue]) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(claims.count)
        for claim in claims {
            guard let value = Self.value(at: claim.claimPath, in: payload), let text = Self.headerValue(value) else { continue }
            fields.append((claim.header, text))
        }
        return fields
    }

    /// The value at a dotted claim path (`custom_claims.subscription.tier`).
    public static func value(at path: [String], in payload: [String: JSONValue]) -> JSONValue? {
        guard let first = path.first, var value = payload[first] else { return nil }
        for key in path.dropFirst() {
            guard let next = value[key] else { return nil }
            value = next
        }
        return value
    }

    /// The field value for a claim, or `nil` when it has none or cannot travel in a header.
    ///
    /// A string holding a control character (CR, LF, NUL…) is not forwarded at all: writing it
    /// would split or corrupt the request head, and silently altering it would hand the
    /// upstream a value that was never signed. The payload header still carries it, encoded.
    public static func headerValue(_ value: JSONValue) -> String? {
        let text: String
        switch value {
        case .null: return nil
        case .string(let string): text = string
        case .bool, .integer, .double, .array, .object: text = value.serializedString()
        }
        guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else { return nil }
        return text
    }
}
