#if canImport(Glibc)
import Glibc
#endif
import AGFormats
import Foundation

/// Structured logger: one line per event, data in fields, never in the message text.
///
/// Each line is written with a single `write(2)`, so lines from worker threads never interleave.
/// Never pass tokens, assertions or keys as fields.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warn, error

        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }

        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warn: "warn"
            case .error: "error"
            }
        }
    }

    public enum Format: String, Sendable {
        case json, text
    }

    public var level: Level
    public var format: Format
    public var fileDescriptor: Int32

    public init(level: Level = .info, format: Format = .json, fileDescriptor: Int32 = 2) {
        self.level = level
        self.format = format
        self.fileDescriptor = fileDescriptor
    }

    public func debug(_ message: String, _ fields: [(String, LogValue)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, LogValue)] = []) { log(.info, message, fields) }
    public func warn(_ message: String, _ fields: [(String, LogValue)] = []) { log(.warn, message, fields) }
    public func error(_ message: String, _ fields: [(String, LogValue)] = []) { log(.error, message, fields) }

    public func log(_ level: Level, _ message: String, _ fields: [(String, LogValue)]) {
        guard level >= self.level else { return }
        var line: String
        switch format {
        case .json:
            var json = JSONObjectWriter()
            json.add("ts", Self.timestamp())
            json.add("level", level.name)
            json.add("msg", message)
            for (key, value) in fields { value.write(key, into: &json) }
            line = json.finished()
        case .text:
            line = "\(Self.timestamp()) \(level.name.uppercased()) \(message)"
            for (key, value) in fields { line += " \(key)=\(value.text)" }
        }
        line += "\n"
        writeLine(line)
    }

    /// Writes a pre-rendered line.
    public func writeLine(_ line: String) {
        var line = line
        line.withUTF8 { write(UnsafeRawBufferPointer($0)) }
    }

    /// Writes pre-rendered lines as they are (the access log's batches, already UTF-8: made
    /// into a `String` first, each batch was validated byte by byte, ~300 instructions per
    /// proxied request).
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fileDescriptor, base + offset, bytes.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }

    /// RFC 3339 UTC with milliseconds.
    public static func timestamp(_ date: Date = Date()) -> String {
        ISO8601.string(date, fractional: true)
    }
}

/// A field value in a structured log line.
public enum LogValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }

    func write(_ key: String, into json: inout JSONObjectWriter) {
        switch self {
        case .string(let s): json.add(key, s)
        case .int(let i): json.add(key, i)
        case .double(let d): json.add(key, d)
        case .bool(let b): json.add(key, b)
        }
    }

    /// The value in a `log.format: text` line: a string as it is while it is plain, else quoted
    /// with `"`, `\` and control characters escaped, so that no value (a file name with a
    /// newline, a sweep of stop 35's fixes found) can end its line or forge another.
    var text: String {
        switch self {
        case .string(let s): Self.isPlain(s) ? s : Self.quoted(s)
        case .int(let i): String(i)
        case .double(let d): String(d)
        case .bool(let b): String(b)
        }
    }

    private static func isPlain(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
            && !s.unicodeScalars.contains { (0x80...0x9F).contains($0.value) }
    }

    private static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// ISO 8601 / RFC 3339 timestamps in UTC, formatted without Foundation's formatter (hot path).
public enum ISO8601 {
    public static func string(_ date: Date, fractional: Bool = false) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        let millis = Int((interval - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var out = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
        out += "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        if fractional { out += ".\(pad(Int32(millis), 3))" }
        return out + "Z"
    }
}
