/// A reply from Redis (RESP2), copied out of hiredis into plain Swift values.
///
/// A top-level error reply is delivered as `RedisError.server`; `.error` only appears nested
/// inside arrays (for example in a script's or a transaction's result).
public enum RedisValue: Sendable, Hashable {
    /// A bulk string: arbitrary bytes.
    case bulk([UInt8])
    /// A simple status reply such as `OK` or `PONG`.
    case status(String)
    case integer(Int64)
    case array([RedisValue])
    case error(String)
    /// The nil bulk string or nil array.
    case null
}

extension RedisValue {
    /// The reply as text: a bulk string decoded as UTF-8, or a status.
    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }

    /// The bytes of a bulk string.
    public var bytes: [UInt8]? {
        if case .bulk(let bytes) = self { bytes } else { nil }
    }

    /// An integer reply, or a bulk string holding a decimal integer (as `HGET` returns for counters).
    public var int: Int64? {
        switch self {
        case .integer(let value): value
        case .bulk(let bytes): Int64(String(decoding: bytes, as: UTF8.self))
        default: nil
        }
    }

    public var array: [RedisValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    public var isNull: Bool { self == .null }

    /// A flat field/value array (`HGETALL`, `CONFIG GET`) as a dictionary of strings.
    public var hashFields: [String: String]? {
        guard case .array(let elements) = self, elements.count % 2 == 0 else { return nil }
        var fields: [String: String] = [:]
        fields.reserveCapacity(elements.count / 2)
        var index = 0
        while index < elements.count {
            guard let field = elements[index].string, let value = elements[index + 1].string else { return nil }
            fields[field] = value
            index += 2
        }
        return fields
    }
}

extension RedisValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral {
    /// A string literal stands for a bulk string.
    public init(stringLiteral value: String) { self = .bulk(Array(value.utf8)) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(arrayLiteral elements: RedisValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
}

/// Why a command did not produce a reply.
public enum RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not connected, or the connection was lost before the reply; carries hiredis's `errstr`
    /// or the client's reason. The command may or may not have run.
    case unavailable(String)
    /// No reply within the client's timeout; a late reply is discarded. The command may have run.
    case timeout
    /// Redis answered with an error reply, e.g. `WRONGTYPE …` or `NOSCRIPT …`.
    case server(String)

    /// Redis answered (with an error reply): the command reached the server and was refused.
    public var isServerReply: Bool {
        if case .server = self { true } else { false }
    }

    public var description: String {
        switch self {
        case .unavailable(let reason): "Redis unavailable: \(reason)"
        case .timeout: "Redis command timed out"
        case .server(let message): "Redis error: \(message)"
        }
    }
}
