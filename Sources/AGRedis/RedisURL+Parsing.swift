extension RedisURL {
    /// Parses any of the four URL forms; userinfo parts may be percent-encoded.
    public init(parsing text: String) throws(RedisURLError) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { throw .missingScheme }
        let scheme = text[..<colon].lowercased()
        let rest = text[text.index(colon, offsetBy: 3)...]
        switch scheme {
        case "redis": self = try Self.parseStandalone(rest)
        case "unix": self = try Self.parseUnix(rest)
        case "redis-cluster": self = try Self.parseCluster(rest)
        case "redis-sentinel": self = try Self.parseSentinel(rest)
        default: throw .unsupportedScheme(scheme)
        }
    }

    private static func parseStandalone(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("?") || rest.contains("#") { throw .unexpectedQuery }
        let (credentials, hosts, path) = try splitAuthority(rest, defaultPort: defaultPort)
        guard hosts.count == 1 else { throw .multipleHosts }
        let database = path.isEmpty ? 0 : try parseDatabase(path)
        return RedisURL(endpoint: hosts[0], username: credentials.username, password: credentials.password, database: database)
    }

    private static func parseCluster(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("?") || rest.contains("#") { throw .unexpectedQuery }
        let (credentials, seeds, path) = try splitAuthority(rest, defaultPort: defaultPort)
        guard path.isEmpty else { throw .clusterDatabase }
        return RedisURL(topology: .cluster(seeds: seeds), username: credentials.username, password: credentials.password)
    }

    private static func parseSentinel(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("#") { throw .unexpectedQuery }
        let question = rest.firstIndex(of: "?") ?? rest.endIndex
        let (credentials, sentinels, path) = try splitAuthority(rest[..<question], defaultPort: defaultSentinelPort)
        guard !path.isEmpty else { throw .missingMasterName }
        guard path.utf8.allSatisfy(isNameByte) else { throw .invalidMasterName(String(path)) }
        let database = try parseDatabaseQuery(rest[question...].dropFirst())
        return RedisURL(topology: .sentinel(sentinels: sentinels, masterName: String(path)),
                        username: credentials.username, password: credentials.password, database: database)
    }

    private static func parseUnix(_ rest: Substring) throws(RedisURLError) -> RedisURL {
        if rest.contains("#") { throw .unexpectedQuery }
        let question = rest.firstIndex(of: "?") ?? rest.endIndex
        var path = rest[..<question]
        var credentials: (username: String?, password: String?) = (nil, nil)
        if !path.hasPrefix("/"), let at = path.firstIndex(of: "@") {
            credentials = try parseUserInfo(path[..<at])
            path = path[path.index(after: at)...]
        }
        guard path.hasPrefix("/"), path.count > 1 else { throw .missingSocketPath }
        let database = try parseDatabaseQuery(rest[question...].dropFirst())
        return RedisURL(endpoint: .unix(path: String(path)),
                        username: credentials.username, password: credentials.password, database: database)
    }

    /// Splits `[userinfo@]host[:port][,host[:port]…][/path]` into its parts; the path comes back
    /// without its leading slash (empty for none or a bare `/`).
    private static func splitAuthority(_ rest: Substring, defaultPort: Int) throws(RedisURLError)
        -> (credentials: (username: String?, password: String?), hosts: [Endpoint], path: Substring) {
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash]
        let path = rest[slash...].dropFirst()
        var credentials: (username: String?, password: String?) = (nil, nil)
        if let at = authority.lastIndex(of: "@") {
            credentials = try parseUserInfo(authority[..<at])
            authority = authority[authority.index(after: at)...]
        }
        guard !authority.isEmpty else { throw .missingHost }
        var hosts: [Endpoint] = []
        for item in authority.split(separator: ",", omittingEmptySubsequences: false) {
            let endpoint = try parseHostPort(item, defaultPort: defaultPort)
            guard !hosts.contains(endpoint) else { throw .duplicateHost(endpoint.description) }
            hosts.append(endpoint)
        }
        return (credentials, hosts, path)
    }

    private static func parseHostPort(_ hostPort: Substring, defaultPort: Int) throws(RedisURLError) -> Endpoint {
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
            guard host.contains(":"), isIPv6Literal(host) else { throw .invalidHost(String(hostPort)) }
        } else if let colon = hostPort.firstIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw .missingHost }
        if !hostPort.hasPrefix("[") {
            guard isHostName(host) else { throw .invalidHost(String(host)) }
        }
        var port = defaultPort
        if let portText {
            guard portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let value = Int(portText), (1...65535).contains(value) else {
                throw .invalidPort(String(portText))
            }
            port = value
        }
        return .tcp(host: String(host), port: port)
    }

    /// A DNS name or dotted IPv4: labels of letters, digits, `-` and `_`, no empty label.
    private static func isHostName(_ host: Substring) -> Bool {
        let name = host.hasSuffix(".") ? host.dropLast() : host
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && label.utf8.allSatisfy { byte in
                isNameByte(byte) && byte != UInt8(ascii: ".")
            }
        }
    }

    private static func isIPv6Literal(_ host: Substring) -> Bool {
        host.utf8.allSatisfy { byte in
            byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".") || isHexDigit(byte)
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."): true
        default: false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }

    private static func parseUserInfo(_ info: Substring) throws(RedisURLError) -> (username: String?, password: String?) {
        guard let colon = info.firstIndex(of: ":") else { throw .missingPassword }
        let user = try percentDecode(info[..<colon])
        let password = try percentDecode(info[info.index(after: colon)...])
        return (user.isEmpty ? nil : user, password)
    }

    private static func parseDatabaseQuery(_ query: Substring) throws(RedisURLError) -> Int {
        var database = 0
        guard !query.isEmpty else { return 0 }
        for item in query.split(separator: "&") {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, pair[0] == "db" else { throw .unexpectedQuery }
            database = try parseDatabase(pair[1])
        }
        return database
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
}
