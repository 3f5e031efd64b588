/// Where and how to reach Redis: one server, a Redis Cluster, or a Sentinel-managed primary.
///
/// - `redis://[[user]:password@]host[:port][/db]` — one server (port 6379 by default);
/// - `unix://[[user]:password@]/path/to/redis.sock[?db=N]` — one server on a unix socket;
/// - `redis-cluster://[[user]:password@]host[:port][,host[:port]…]` — seed nodes of a cluster
///   (database 0 only, as Redis Cluster has no other);
/// - `redis-sentinel://[[user]:password@]host[:port][,host[:port]…]/<master-name>[?db=N]` —
///   sentinels (port 26379 by default) and the name of the master they watch.
///
/// Hosts are IP literals (IPv6 in brackets) or DNS names, resolved asynchronously. Credentials
/// authenticate to the data nodes; sentinels are asked without them.
public struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    /// The transport to one server.
    public enum Endpoint: Sendable, Hashable, CustomStringConvertible {
        case tcp(host: String, port: Int)
        case unix(path: String)

        /// `host:port` (IPv6 in brackets) or the socket path.
        public var description: String {
            switch self {
            case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            case .unix(let path): path
            }
        }
    }

    /// How the servers are organised.
    public enum Topology: Sendable, Hashable {
        case standalone(Endpoint)
        /// Seed nodes (`.tcp` endpoints); the slot map names the rest.
        case cluster(seeds: [Endpoint])
        /// Sentinels (`.tcp` endpoints) and the master name they know the primary by.
        case sentinel(sentinels: [Endpoint], masterName: String)
    }

    public static let defaultPort = 6379
    public static let defaultSentinelPort = 26379

    public var topology: Topology
    /// ACL user (Redis 6+); `nil` authenticates as the default user.
    public var username: String?
    public var password: String?
    /// Always 0 for a cluster.
    public var database: Int

    public init(topology: Topology, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.topology = topology
        self.username = username
        self.password = password
        self.database = database
    }

    /// One server.
    public init(endpoint: Endpoint, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.init(topology: .standalone(endpoint), username: username, password: password, database: database)
    }

    /// The URL with the password replaced by `***`, safe for logs.
    public var description: String {
        var auth = ""
        if let password {
            auth = "\(username.map(Self.percentEncode) ?? ""):\(password.isEmpty ? "" : "***")@"
        }
        switch topology {
        case .standalone(.tcp(let host, let port)):
            return "redis://\(auth)\(Endpoint.tcp(host: host, port: port))/\(database)"
        case .standalone(.unix(let path)):
            return "unix://\(auth)\(path)\(database == 0 ? "" : "?db=\(database)")"
        case .cluster(let seeds):
            return "redis-cluster://\(auth)\(seeds.map(\.description).joined(separator: ","))"
        case .sentinel(let sentinels, let masterName):
            let hosts = sentinels.map(\.description).joined(separator: ",")
            return "redis-sentinel://\(auth)\(hosts)/\(masterName)\(database == 0 ? "" : "?db=\(database)")"
        }
    }

    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let scalar = Unicode.Scalar(byte)
            if byte < 0x80, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-._~".unicodeScalars.contains(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
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
    /// `redis://` and `unix://` name one server.
    case multipleHosts
    case duplicateHost(String)
    case missingMasterName
    case invalidMasterName(String)
    /// Redis Cluster serves database 0 only.
    case clusterDatabase

    public var description: String {
        switch self {
        case .missingScheme: "Redis URL must start with redis://, unix://, redis-cluster:// or redis-sentinel://"
        case .unsupportedScheme(let scheme):
            "unsupported Redis URL scheme '\(scheme)' (use redis://, unix://, redis-cluster:// or redis-sentinel://)"
        case .missingHost: "Redis URL has no host"
        case .invalidHost(let host): "invalid host '\(host)' in Redis URL (expected an IP address, [IPv6] or a DNS name)"
        case .invalidPort(let port): "invalid port '\(port)' in Redis URL (expected 1-65535)"
        case .invalidDatabase(let db): "invalid database '\(db)' in Redis URL (expected a non-negative integer)"
        case .missingPassword: "Redis URL credentials must be ':password@' or 'user:password@'"
        case .missingSocketPath: "unix:// Redis URL needs an absolute socket path, e.g. unix:///run/redis.sock"
        case .invalidPercentEncoding: "invalid percent-encoding in Redis URL credentials"
        case .unexpectedQuery: "unexpected query in Redis URL (only unix:// and redis-sentinel:// URLs accept '?db=N')"
        case .multipleHosts: "redis:// names one server; list several with redis-cluster:// or redis-sentinel://"
        case .duplicateHost(let host): "host \(host) is listed twice in the Redis URL"
        case .missingMasterName: "redis-sentinel:// URL needs the master name as its path, e.g. redis-sentinel://s1:26379,s2:26379/mymaster"
        case .invalidMasterName(let name): "invalid master name '\(name)' in redis-sentinel:// URL (letters, digits, '.', '-', '_')"
        case .clusterDatabase: "redis-cluster:// URL cannot select a database (Redis Cluster has only database 0)"
        }
    }

    /// The description without the text that was rejected: a mistyped URL may put a password
    /// where a host or port belongs (`redis://user:secret/0`), so configuration errors use this.
    public var redactedDescription: String {
        switch self {
        case .unsupportedScheme: "unsupported Redis URL scheme"
        case .invalidHost: "invalid host in Redis URL (expected an IP address, [IPv6] or a DNS name)"
        case .invalidPort: "invalid port in Redis URL (expected 1-65535)"
        case .invalidDatabase: "invalid database in Redis URL (expected a non-negative integer)"
        case .duplicateHost: "a host is listed twice in the Redis URL"
        case .invalidMasterName: "invalid master name in redis-sentinel:// URL (letters, digits, '.', '-', '_')"
        default: description
        }
    }
}
