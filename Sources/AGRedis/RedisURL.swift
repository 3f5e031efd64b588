/// Where and how to reach a Redis server: `redis://[[user]:password@]host[:port][/db]` or
/// `unix:///path/to/redis.sock[?db=N]`.
public struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    /// The transport to the server.
    public enum Endpoint: Sendable, Hashable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    public static let defaultPort = 6379

    public var endpoint: Endpoint
    /// ACL user (Redis 6+); `nil` authenticates as the default user.
    public var username: String?
    public var password: String?
    public var database: Int

    public init(endpoint: Endpoint, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.database = database
    }

    /// Parses a `redis://` or `unix://` URL; userinfo parts may be percent-encoded.
    public init(parsing text: String) throws(RedisURLError) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { throw .missingScheme }
        let scheme = text[..<colon].lowercased()
        let rest = text[text.index(colon, offsetBy: 3)...]
        switch scheme {
        case "redis": self = try Self.parseTCP(rest)
        case "unix": self = try Self.parseUnix(rest)
        default: throw .unsupportedScheme(scheme)
        }
    }

    /// The URL with the password replaced by `***`, safe for logs.
    public var description: String {
        var auth = ""
        if let password {
            auth = "\(username.map(Self.percentEncode) ?? ""):\(password.isEmpty ? "" : "***")@"
        }
        switch endpoint {
        case .tcp(let host, let port):
            let hostPart = host.contains(":") ? "[\(host)]" : host
            return "redis://\(auth)\(hostPart):\(port)/\(database)"
        case .unix(let path):
            return "unix://\(auth)\(path)\(database == 0 ? "" : "?db=\(database)")"
        }
    }

    private static func parseTCP(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("?") || rest.contains("#") { throw .unexpectedQuery }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = rest[slash...].dropFirst()

        var hostPort = authority
        var username: String?
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            (username, password) = try parseUserInfo(authority[..<at])
            hostPort = authority[authority.index(after: at)...]
        }

        let host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw .invalidHost(String(hostPort)) }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let afterClose = hostPort[hostPort.index(after: close)...]
            if !afterClose.isEmpty {
                guard afterClose.hasPrefix(":") else { throw .invalidHost(String(hostPort)) }
                portText = afterClose.dropFirst()
            }
        } else if let colon = hostPort.firstIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw .missingHost }

        var port = defaultPort
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw .invalidPort(String(portText))
            }
            port = value
        }

        let database = path.isEmpty ? 0 : try parseDatabase(path)
        return RedisURL(endpoint: .tcp(host: String(host), port: port),
                        username: username, password: password, database: database)
    }

    private static func parseUnix(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("#") { throw .unexpectedQuery }
        let question = rest.firstIndex(of: "?") ?? rest.endIndex
        var path = rest[..<question]
        var username: String?
        var password: String?
        if !path.hasPrefix("/"), let at = path.firstIndex(of: "@") {
            (username, password) = try parseUserInfo(path[..<at])
            path = path[path.index(after: at)...]
        }
        guard path.hasPrefix("/"), path.count > 1 else { throw .missingSocketPath }

        var database = 0
        let query = rest[question...].dropFirst()
        if !query.isEmpty {
            for item in query.split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard pair.count == 2, pair[0] == "db" else { throw .unexpectedQuery }
                database = try parseDatabase(pair[1])
            }
        }
        return RedisURL(endpoint: .unix(path: String(path)),
                        username: username, password: password, database: database)
    }

    private static func parseUserInfo(_ info: Substring) throws(RedisURLError) -> (String?, String) {
        guard let colon = info.firstIndex(of: ":") else { throw .missingPassword }
        let user = try percentDecode(info[..<colon])
        let password = try percentDecode(info[info.index(after: colon)...])
        return (user.isEmpty ? nil : user, password)
    }

    private static func parseDatabase(_ text: Substring) throws(RedisURLError) -> Int {
        guard let value = Int(text), value >= 0, text.allSatisfy(\.isASCII) else {
            throw .invalidDatabase(String(text))
        }
        return value
    }

    private static func percentDecode(_ text: Substring) throws(RedisURLError) -> String {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw .invalidPercentEncoding
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else { throw .invalidPercentEncoding }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-._~".unicodeScalars.contains(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

/// Why a Redis URL was rejected.
public enum RedisURLError: Error, Sendable, Equatable, CustomStringConvertible {
    case missingScheme
    case unsupportedScheme(String)
    case missingHost
    case invalidHost(String)
    case invalidPort(String)
    case invalidDatabase(String)
    case missingPassword
    case missingSocketPath
    case invalidPercentEncoding
    case unexpectedQuery

    public var description: String {
        switch self {
        case .missingScheme: "Redis URL must start with redis:// or unix://"
        case .unsupportedScheme(let scheme): "unsupported Redis URL scheme '\(scheme)' (use redis:// or unix://)"
        case .missingHost: "Redis URL has no host"
        case .invalidHost(let host): "invalid host '\(host)' in Redis URL"
        case .invalidPort(let port): "invalid port '\(port)' in Redis URL (expected 1-65535)"
        case .invalidDatabase(let db): "invalid database '\(db)' in Redis URL (expected a non-negative integer)"
        case .missingPassword: "Redis URL credentials must be ':password@' or 'user:password@'"
        case .missingSocketPath: "unix:// Redis URL needs an absolute socket path, e.g. unix:///run/redis.sock"
        case .invalidPercentEncoding: "invalid percent-encoding in Redis URL credentials"
        case .unexpectedQuery: "unexpected query in Redis URL (only unix:// URLs accept '?db=N')"
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
