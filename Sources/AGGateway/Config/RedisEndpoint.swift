/// Where and how to reach Redis: `redis://[[user]:password@]host[:port][/db]` or `unix:///path[?db=N]`.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    public enum Transport: Sendable, Hashable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    public let transport: Transport
    /// Redis 6 ACL user; `nil` for the default user.
    public let username: String?
    /// Sent with `AUTH`; never part of `description`.
    public let password: String?
    public let database: Int

    /// Parses a Redis URL; `nil` when the scheme, host, port, database or escaping is wrong.
    public init?(_ text: String) {
        if text.hasPrefix("unix://") {
            let rest = text.dropFirst("unix://".count)
            let pieces = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            guard pieces[0].hasPrefix("/"), pieces[0].count > 1, let path = Self.percentDecoded(pieces[0]) else {
                return nil
            }
            var database = 0
            if pieces.count == 2 {
                guard pieces[1].hasPrefix("db="), let parsed = Self.parseDatabase(pieces[1].dropFirst(3)) else {
                    return nil
                }
                database = parsed
            }
            self.init(transport: .unix(path: path), username: nil, password: nil, database: database)
            return
        }
        guard text.hasPrefix("redis://") else { return nil }
        var rest = text.dropFirst("redis://".count)
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = userinfo.firstIndex(of: ":"),
                  let user = Self.percentDecoded(userinfo[..<colon]),
                  let secret = Self.percentDecoded(userinfo[userinfo.index(after: colon)...])
            else { return nil }
            username = user.isEmpty ? nil : user
            password = secret.isEmpty ? nil : secret
        }
        guard let authority = HostName.parseAuthority(rest, defaultPort: 6379) else { return nil }
        var database = 0
        let path = authority.rest.dropFirst()
        if !path.isEmpty {
            guard let parsed = Self.parseDatabase(path) else { return nil }
            database = parsed
        }
        self.init(transport: .tcp(host: authority.host, port: authority.port), username: username, password: password,
                  database: database)
    }

    private init(transport: Transport, username: String?, password: String?, database: Int) {
        self.transport = transport
        self.username = username
        self.password = password
        self.database = database
    }

    /// The URL with any password replaced by `***`, safe for logs.
    public var description: String {
        switch transport {
        case .unix(let path):
            return "unix://\(path)" + (database == 0 ? "" : "?db=\(database)")
        case .tcp(let host, let port):
            var credentials = ""
            if username != nil || password != nil {
                credentials = (username ?? "") + ":" + (password == nil ? "" : "***") + "@"
            }
            return "redis://\(credentials)\(HostName.authority(host: host, port: port))/\(database)"
        }
    }

    private static func parseDatabase(_ text: Substring) -> Int? {
        guard (1...5).contains(text.count), text.allSatisfy(\.isASCIIDigit) else { return nil }
        return Int(text)
    }

    /// Decodes `%XX` escapes; `nil` for a malformed escape or invalid UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                  let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
