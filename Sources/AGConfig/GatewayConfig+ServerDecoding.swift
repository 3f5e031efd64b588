import AGYAML
import AGRedis

/// The `server`, `admin` and `redis` sections: listeners, timeouts, TLS files, the admin token
/// and the Redis URL with its deadlines.
extension GatewayConfig {
    static func decodeServer(_ m: ConfigMapping?, _ d: ConfigDecoder, _ files: ReferencedFiles) -> ServerConfig {
        let timeouts = sub(m?["timeouts"], Keys.timeouts, d)
        func timeout(_ key: String, _ fallback: Duration) -> Duration {
            timeouts?[key].flatMap { d.duration($0) } ?? fallback
        }
        var tls: TLSFiles?
        if let tlsMapping = sub(m?["tls"], Keys.tls, d) {
            let certField = tlsMapping.required("cert")
            let keyField = tlsMapping.required("key")
            let cert = certField.flatMap { files.existing($0, what: "certificate file") }
            let key = keyField.flatMap { files.existing($0, what: "private key file") }
            if let cert, let key, let certField, let keyField {
                tls = TLSFiles(certificateFile: cert, keyFile: key, certificateLocation: d.location(of: certField),
                               keyLocation: d.location(of: keyField))
            }
        }
        // Accepted only where it has an effect: a plain listener has no handshake to time.
        if tls == nil, m?["tls"] == nil, let field = timeouts?["tls_handshake"] {
            d.report(field, "applies only with server.tls: the public listener serves plain HTTP")
        }
        var proxies: [CIDRBlock] = []
        if let items = m?["trusted_proxies"].flatMap({ d.sequence($0) }) {
            proxies = items.compactMap { item in
                guard let text = d.string(item) else { return nil }
                guard let block = CIDRBlock(text) else {
                    var message = "expected an IPv4 or IPv6 address or CIDR block like 10.0.0.0/8 or fd00::/8, got \(ConfigDecoder.quoted(text))"
                    if let hint = CIDRBlock.networkHint(text), hint != text {
                        message = "\(ConfigDecoder.quoted(text)) has host bits set; did you mean \(hint)?"
                    }
                    d.report(item, message)
                    return nil
                }
                return block
            }
        }
        return ServerConfig(
            listen: m?["listen"].flatMap { listenAddress($0, d) } ?? defaultListen,
            workers: m?["workers"].flatMap { d.int($0, in: 0...1_024) } ?? 0,
            maxConnections: m?["max_connections"].flatMap { d.int($0, in: 0...10_000_000) } ?? 0,
            maxBodyBytes: m?["max_body_bytes"].flatMap { d.byteSize($0) } ?? 64 << 10,
            maxProxyBodyBytes: m?["max_proxy_body_bytes"].flatMap { d.byteSize($0) } ?? 100 << 20,
            timeouts: ServerTimeouts(
                read: timeout("read", .seconds(30)),
                header: timeout("header", .seconds(10)),
                bodyMinRate: timeouts?["body_min_rate"].flatMap { d.int($0, in: 0...(1 << 30)) } ?? 240,
                bodyRateWindow: timeout("body_rate_window", .seconds(5)),
                write: timeout("write", .seconds(30)),
                idle: timeout("idle", .seconds(60)),
                upstreamConnect: timeout("upstream_connect", .seconds(2)),
                upstreamResponse: timeout("upstream_response", .seconds(30)),
                tlsHandshake: timeout("tls_handshake", .seconds(10))),
            shutdownGrace: m?["shutdown_grace"].flatMap { d.duration($0, allowZero: true) } ?? .seconds(10),
            trustedProxies: proxies,
            tls: tls)
    }

    static func listenAddress(_ field: ConfigField, _ d: ConfigDecoder) -> ListenAddress? {
        guard let text = d.string(field) else { return nil }
        guard let address = ListenAddress(text) else {
            d.report(field, "expected host:port (IPv6 in brackets, e.g. [::]:8080), got \(ConfigDecoder.quoted(text))")
            return nil
        }
        guard address.boundAddress != nil else {
            d.report(field, "expected an IP address or localhost as host (a listener binds an address, not a name), got \(ConfigDecoder.quoted(text))")
            return nil
        }
        return address
    }

    /// The public and admin listeners are bound side by side at start; two that would take the
    /// same port on one address failed there with "Address already in use". Refused here
    /// instead, at the written one of the two (`admin.listen` when both are).
    static func refuseSharedListenPort(server: ListenAddress, _ serverSection: ConfigMapping?,
                                       admin: ListenAddress, _ adminSection: ConfigMapping?, _ d: ConfigDecoder) {
        // A refused address stands in as its default: a clash of that default is not in the file.
        guard !d.problems.contains(where: { $0.keyPath == "server.listen" || $0.keyPath == "admin.listen" }),
              let reason = server.clash(with: admin) else { return }
        let serverField = serverSection?["listen"], adminField = adminSection?["listen"]
        guard let field = adminField ?? serverField else { return }
        let (address, otherKey, other, otherField) = adminField != nil
            ? (admin, "server.listen", server, serverField) : (server, "admin.listen", admin, adminField)
        let written = otherField.map { "line \($0.line)" } ?? "the default"
        d.report(field, "\(ConfigDecoder.quoted(address.description)) overlaps \(otherKey) \(ConfigDecoder.quoted(other.description)) "
                 + "(\(written)): \(reason); give each listener a port of its own")
    }

    static func decodeAdmin(_ m: ConfigMapping?, _ d: ConfigDecoder, _ files: ReferencedFiles) -> AdminConfig {
        let tokenEnv = m?["token_env"].flatMap { field -> String? in
            guard let name = d.string(field) else { return nil }
            guard name.first.map({ !$0.isNumber }) == true,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
            else {
                d.report(field, "expected an environment variable name (letters, digits, _), got \(ConfigDecoder.quoted(name))")
                return nil
            }
            return name
        }
        // Without a token the admin API answers every call 401, /metrics and reload included.
        let noToken = "holds no token, and the admin API would refuse every call; write one into it (openssl rand -hex 32)"
        var tokenFile: String?
        if let fileField = m?["token_file"] {
            // With token_env as an alternative source, the file may legitimately be absent or
            // empty: the variable is read when serving.
            if tokenEnv == nil {
                tokenFile = files.existing(fileField, what: "admin token file")
                if let file = tokenFile, AdminConfig.token(inFile: file) == nil {
                    d.report(fileField, "admin token file \(ConfigDecoder.quoted(file)) \(noToken)")
                }
            } else {
                tokenFile = d.string(fileField).map { files.resolve($0) }
            }
        } else if m?["token_env"] == nil {
            // A null token_env is the key left out, as everywhere: the default file applies
            // (were it skipped, the admin API would have no token at all).
            let defaultFile = files.resolve(defaultAdminTokenFile)
            let path = ConfigKeyPath.root.key("admin").key("token_file")
            if let reason = ConfigFiles.unreadableReason(defaultFile) {
                d.report(line: m?.line ?? 1, path: path,
                         "admin token file \(ConfigDecoder.quoted(defaultFile)) (the default) \(reason); create it or set admin.token_file or admin.token_env")
            } else if AdminConfig.token(inFile: defaultFile) == nil {
                d.report(line: m?.line ?? 1, path: path, "admin token file \(ConfigDecoder.quoted(defaultFile)) (the default) \(noToken)")
            }
            tokenFile = defaultFile
        }
        return AdminConfig(listen: m?["listen"].flatMap { listenAddress($0, d) } ?? defaultAdminListen,
                           tokenFile: tokenFile, tokenEnvironmentVariable: tokenEnv)
    }

    static func decodeRedis(_ field: ConfigField?, _ d: ConfigDecoder) -> RedisConfig {
        let m = sub(field, Keys.redis, d)
        let endpoint = m?["url"].flatMap { field -> RedisURL? in
            guard let text = d.string(field) else { return nil }
            do throws(RedisURLError) {
                return try RedisURL(parsing: text)
            } catch {
                // The URL may hold a password: show only its scheme, and the error without values.
                let scheme = text.firstRange(of: "://").map { String(text[..<$0.lowerBound]) + "://…" } ?? "a value without a scheme"
                d.report(field, "\(error.redactedDescription) (got \(scheme)); expected redis://[[user]:password@]host[:port][/db], unix:///path[?db=N], "
                    + "redis-cluster://[[user]:password@]host:port[,host:port…] or "
                    + "redis-sentinel://[[user]:password@]host:port[,host:port…]/<master-name>[?db=N]")
                return nil
            }
        }
        let timeout = m?["timeout"].flatMap { d.duration($0) } ?? .milliseconds(250)
        let waitReplicas = m?["wait_replicas"].flatMap { d.int($0, in: 0...16) } ?? 0
        var waitTimeout = timeout / 2
        if let waitField = m?["wait_timeout"], let value = d.duration(waitField) {
            if value >= timeout {
                d.report(waitField, "must be shorter than redis.timeout (\(timeout)), which bounds the whole commit")
            } else {
                waitTimeout = value
            }
        }
        return RedisConfig(url: endpoint ?? defaultRedis, timeout: timeout, waitReplicas: waitReplicas, waitTimeout: waitTimeout)
    }
}
