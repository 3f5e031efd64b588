import AGRedis

extension RedisConfig {
    /// The endpoint in the Redis client's own terms.
    public var url: RedisURL {
        switch endpoint.transport {
        case .tcp(let host, let port):
            RedisURL(endpoint: .tcp(host: host, port: port), username: endpoint.username, password: endpoint.password, database: endpoint.database)
        case .unix(let path):
            RedisURL(endpoint: .unix(path: path), username: endpoint.username, password: endpoint.password, database: endpoint.database)
        }
    }
}
