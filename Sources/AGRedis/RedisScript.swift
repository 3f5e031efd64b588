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
        // One array, built in place: this runs for every attestation-route command.
        func command(_ name: String, _ body: String) -> [String] {
            var command: [String] = []
            command.reserveCapacity(3 + keys.count + args.count)
            command.append(name)
            command.append(body)
            command.append(String(keys.count))
            command.append(contentsOf: keys)
            command.append(contentsOf: args)
            return command
        }
        send(command("EVALSHA", script.sha1), confirmedBy: replicas, within: within) { [weak self] result in
            guard case .failure(.server(let message)) = result, message.hasPrefix("NOSCRIPT"), let self else {
                completion(result)
                return
            }
            self.send(command("EVAL", script.source), confirmedBy: replicas, within: within, completion: completion)
        }
    }
}
