/// A Lua script with its SHA-1, so it can be run with `EVALSHA` without a prior `SCRIPT LOAD`.
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// Lowercase hex SHA-1 of `source`, the name Redis gives the script.
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        self.sha1 = SHA1.hexDigest(source.utf8)
    }
}

extension RedisClient {
    /// Runs `script` with `EVALSHA`; when the server does not know it (`NOSCRIPT`, e.g. after a
    /// restart or `SCRIPT FLUSH`), retries once with `EVAL`, which also caches it.
    ///
    /// The retry is sent after the `NOSCRIPT` reply, so it is ordered after commands sent in
    /// between, and the whole call can take up to twice the client's timeout.
    ///
    /// With `confirmedBy` > 0 the script's writes are confirmed by `WAIT` (see
    /// `send(_:confirmedBy:within:completion:)`).
    public func evalScript(_ script: RedisScript, keys: [String] = [], args: [String] = [],
                           confirmedBy replicas: Int = 0, within: Duration = .zero,
                           completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        let tail = [String(keys.count)] + keys + args
        send(["EVALSHA", script.sha1] + tail, confirmedBy: replicas, within: within) { [weak self] result in
            guard case .failure(.server(let message)) = result, message.hasPrefix("NOSCRIPT"), let self else {
                completion(result)
                return
            }
            self.send(["EVAL", script.source] + tail, confirmedBy: replicas, within: within, completion: completion)
        }
    }
}
