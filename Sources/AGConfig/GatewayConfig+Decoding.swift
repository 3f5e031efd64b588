import AGYAML
import AGRedis
extension GatewayConfig {
    public static let defaultListen = ListenAddress("0.0.0.0:8080")!
    public static let defaultAdminListen = ListenAddress("127.0.0.1:9901")!
    public static let defaultRedis = RedisURL(endpoint: .tcp(host: "127.0.0.1", port: 6379))
    public static let defaultAdminTokenFile = "../.run/admin-token"
    public static let defaultRootCAFile = "Apple_App_Attestation_Root_CA.pem"

    enum Keys {
        static let root = ["server", "admin", "redis", "tokens", "challenge", "tiers", "ip_limits", "rate_limits", "proxy",
                           "quotas", "app_attest", "tenants_dir", "log", "resolver"]
        static let server = ["listen", "workers", "max_connections", "max_body_bytes", "max_proxy_body_bytes", "timeouts",
                             "shutdown_grace", "trusted_proxies", "tls"]
        static let timeouts = ["read", "header", "body_min_rate", "body_rate_window", "write", "idle", "upstream_connect",
                               "upstream_response", "tls_handshake"]
        static let tls = ["cert", "key"]
        static let admin = ["listen", "token_file", "token_env"]
        static let redis = ["url", "timeout", "wait_replicas", "wait_timeout"]
        static let proxy = ["unverified_token_policy", "upstream_keepalive"]
        static let tokens = ["issuer", "ttl", "leeway", "keys"]
        static let tokenKey = ["kid", "algorithm", "file", "active"]
        static let challenge = ["ttl"]
        static let tier = ["attest", "challenge", "api", "mad_limit"]
        static let ipLimits = ["challenge", "validate", "psso_nonce"]
        static let rateLimits = ["on_store_error"]
        static let quotas = ["grace", "warn_ratio"]
        static let appAttest = ["root_ca", "test_ca", "allow_test_ca"]
        static let log = ["format", "level", "access_log"]
        static let resolver = ["nameservers", "timeout"]
    }

    /// Decodes `gateway.yaml`; problems go to `decoder`, and defaults stand in for bad values so
    /// the rest of the file is still checked.
    public static func decode(_ root: YAMLNode?, sourcePath: String, decoder d: ConfigDecoder) -> GatewayConfig {
        let directory = ConfigFiles.directory(of: sourcePath)
        let files = ReferencedFiles(decoder: d, directory: directory)
        let top = d.rootMapping(root, allowed: Keys.root)
        let serverSection = sub(top["server"], Keys.server, d)
        let adminSection = sub(top["admin"], Keys.admin, d)
        let server = decodeServer(serverSection, d, files)
        let admin = decodeAdmin(adminSection, d, files)
        refuseSharedListenPort(server: server.listen, serverSection, admin: admin.listen, adminSection, d)
        return GatewayConfig(
            sourcePath: sourcePath,
            server: server,
            admin: admin,
            redis: decodeRedis(top["redis"], d),
            tokens: decodeTokens(top.required("tokens"), d, files),
            challenge: ChallengeConfig(ttl: sub(top["challenge"], Keys.challenge, d)?["ttl"]
                .flatMap { d.duration($0) } ?? .seconds(300)),
            tiers: decodeTiers(top["tiers"], d),
            ipLimits: decodeIPLimits(top["ip_limits"], d),
            rateLimits: RateLimitConfig(onStoreError: sub(top["rate_limits"], Keys.rateLimits, d)?["on_store_error"]
                .flatMap { d.oneOf($0, StoreErrorPolicy.self) } ?? .local),
            proxy: decodeProxy(top["proxy"], d),
            quotas: decodeQuotas(top["quotas"], d),
            appAttest: decodeAppAttest(top["app_attest"], d, files),
            tenantsDirectory: decodeTenantsDirectory(top, d, files),
            log: decodeLog(top["log"], d),
            resolver: decodeResolver(top["resolver"], d))
    }

    /// A nested section; `nil` when absent or not a mapping (already reported).
    static func sub(_ field: ConfigField?, _ allowed: [String], _ d: ConfigDecoder) -> ConfigMapping? {
        field.flatMap { d.mapping($0, allowed: allowed) }
    }

    private static func decodeTokens(_ field: ConfigField?, _ d: ConfigDecoder, _ files: ReferencedFiles) -> TokenConfig {
        let m = sub(field, Keys.tokens, d)
        var keys: [TokenKeyConfig] = []
        if let m, let keysField = m.required("keys"), let items = d.sequence(keysField) {
            if items.isEmpty { d.report(line: keysField.keyLine, path: keysField.path, "expected at least one key") }
            var kidLines: [String: Int] = [:]
            var activeIndex: Int?
            for (index, item) in items.enumerated() {
                guard let km = d.mapping(item, allowed: Keys.tokenKey) else { continue }
                let kid = km.required("kid").flatMap { field -> String? in
                    guard let kid = d.string(field) else { return nil }
                    guard kid.count <= 128, kid.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\"" }) else {
                        d.report(field, "expected printable ASCII without spaces or quotes (at most 128 characters)")
                        return nil
                    }
                    if let first = kidLines[kid] {
                        d.report(field, "duplicate kid \(ConfigDecoder.quoted(kid)) (first used at line \(first))")
                        return nil
                    }
                    kidLines[kid] = field.line
                    return kid
                }
                let algorithm = km["algorithm"].flatMap { d.oneOf($0, TokenAlgorithm.self) } ?? .es256
                let file = km.required("file").flatMap { files.existing($0, what: "key file") }
                var isActive = items.count == 1
                if let activeField = km["active"], let active = d.bool(activeField) {
                    isActive = active
                    if active, let first = activeIndex {
                        d.report(activeField, "only one key may be active; tokens.keys[\(first)] is already active")
                        isActive = false
                    }
                }
                if isActive, activeIndex == nil { activeIndex = index }
                if let kid, let file, let fileField = km["file"] {
                    keys.append(TokenKeyConfig(kid: kid, algorithm: algorithm, file: file, isActive: isActive,
                                               location: d.location(of: fileField)))
                }
            }
            if activeIndex == nil, !items.isEmpty {
                d.report(line: keysField.keyLine, path: keysField.path, "exactly one key must have active: true, found none")
            }
        }
        return TokenConfig(
            issuer: m?.required("issuer").flatMap { d.string($0) } ?? "",
            ttl: m?["ttl"].flatMap { d.duration($0) } ?? .seconds(3_600),
            leeway: m?["leeway"].flatMap { d.duration($0, allowZero: true) } ?? .seconds(30),
            keys: keys)
    }

    private static func decodeTiers(_ field: ConfigField?, _ d: ConfigDecoder) -> [String: RateTier] {
        var tiers = RateTier.builtIn
        guard let field, let entries = d.entries(field) else { return tiers }
        for (name, tierField) in entries {
            guard !name.isEmpty, name.count <= 32,
                  name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_" || $0 == "-") })
            else {
                d.report(line: tierField.keyLine, path: tierField.path,
                         "tier names use lowercase letters, digits, - and _ (at most 32 characters)")
                continue
            }
            guard let m = d.mapping(tierField, allowed: Keys.tier) else { continue }
            let base = RateTier.builtIn[name]
            func limit(_ key: String, _ inherited: Int?) -> Int? {
                if let inherited, m[key] == nil { return inherited }
                return m.required(key).flatMap { d.int($0, in: 1...RateTier.maximumLimitPerMinute) }
            }
            let attest = limit("attest", base?.attest)
            let challenge = limit("challenge", base?.challenge)
            let api = limit("api", base?.api)
            var madLimit: DeviceLimit?
            if let base, m["mad_limit"] == nil {
                madLimit = base.madLimit
            } else if let madField = m.required("mad_limit") {
                madLimit = deviceLimit(madField, d)
            }
            if let attest, let challenge, let api, let madLimit {
                tiers[name] = RateTier(name: name, attest: attest, challenge: challenge, api: api, madLimit: madLimit)
            }
        }
        return tiers
    }

    private static func deviceLimit(_ field: ConfigField, _ d: ConfigDecoder) -> DeviceLimit? {
        if case .scalar(let scalar) = field.node.content {
            if scalar.text == "unlimited" { return .unlimited }
            if case .int(let value) = scalar.resolved, value > 0 { return .limited(value) }
        }
        d.report(field, "expected a positive integer or unlimited, got \(ConfigDecoder.describe(field.node))")
        return nil
    }

    private static func decodeIPLimits(_ field: ConfigField?, _ d: ConfigDecoder) -> IPLimitConfig {
        let m = sub(field, Keys.ipLimits, d)
        let limits = 1...RateTier.maximumLimitPerMinute
        return IPLimitConfig(challenge: m?["challenge"].flatMap { d.int($0, in: limits) } ?? 120,
                             validate: m?["validate"].flatMap { d.int($0, in: limits) } ?? 30,
                             pssoNonce: m?["psso_nonce"].flatMap { d.int($0, in: limits) } ?? 120)
    }

    private static func decodeProxy(_ field: ConfigField?, _ d: ConfigDecoder) -> ProxyConfig {
        let m = sub(field, Keys.proxy, d)
        return ProxyConfig(unverifiedTokenPolicy: m?["unverified_token_policy"].flatMap { d.oneOf($0, UnverifiedTokenPolicy.self) } ?? .deny,
                           upstreamKeepalive: m?["upstream_keepalive"].flatMap { d.int($0, in: 0...65_536) }
                               ?? ProxyConfig.defaultUpstreamKeepalive)
    }

    private static func decodeQuotas(_ field: ConfigField?, _ d: ConfigDecoder) -> QuotaConfig {
        let m = sub(field, Keys.quotas, d)
        return QuotaConfig(
            grace: m?["grace"].flatMap { d.duration($0, allowZero: true) } ?? .seconds(7 * 86_400),
            warnRatio: m?["warn_ratio"].flatMap { d.double($0, in: 0.01...1, rangeText: "from 0.01 to 1") } ?? 0.8)
    }

    private static func decodeAppAttest(_ field: ConfigField?, _ d: ConfigDecoder,
                                        _ files: ReferencedFiles) -> AppAttestConfig {
        let m = sub(field, Keys.appAttest, d)
        var rootCA = files.resolve(defaultRootCAFile)
        let rootPath = ConfigKeyPath.root.key("app_attest").key("root_ca")
        var rootLocation = ConfigLocation(file: d.file, line: m?.line ?? 1, keyPath: rootPath.description)
        if let rootField = m?["root_ca"] {
            rootCA = files.existing(rootField, what: "root CA file") ?? rootCA
            rootLocation = d.location(of: rootField)
        } else if let reason = ConfigFiles.unreadableReason(rootCA) {
            d.report(line: m?.line ?? 1, path: rootPath, "root CA file \(ConfigDecoder.quoted(rootCA)) (the default) \(reason)")
        }
        let testField = m?["test_ca"]
        return AppAttestConfig(rootCAFile: rootCA,
                               testCAFile: testField.flatMap { files.existing($0, what: "test CA file") },
                               allowTestCA: m?["allow_test_ca"].flatMap { d.bool($0) } ?? false,
                               rootCALocation: rootLocation, testCALocation: testField.map { d.location(of: $0) })
    }

    private static func decodeTenantsDirectory(_ top: ConfigMapping, _ d: ConfigDecoder,
                                               _ files: ReferencedFiles) -> String {
        let field = top["tenants_dir"]
        let path = files.resolve(field.flatMap { d.string($0) } ?? "tenants")
        if !ConfigFiles.isDirectory(path) {
            d.report(line: field?.line ?? top.line, path: ConfigKeyPath.root.key("tenants_dir"),
                     "directory \(ConfigDecoder.quoted(path)) does not exist or is not a directory")
        }
        return path
    }

    private static func decodeResolver(_ field: ConfigField?, _ d: ConfigDecoder) -> ResolverConfig {
        let m = sub(field, Keys.resolver, d)
        let items = m?["nameservers"].flatMap { d.sequence($0) }
        let nameservers = items?.compactMap { item -> String? in
            guard let text = d.string(item) else { return nil }
            guard isNameserver(text) else {
                d.report(item, "expected an IP address with an optional port (10.0.0.2, 10.0.0.2:5353, [fd00::2]:53), got \(ConfigDecoder.quoted(text))")
                return nil
            }
            return text
        }
        // An empty list only: entries refused above were reported already.
        if let items, items.isEmpty, let field = m?["nameservers"] {
            d.report(field, "expected at least one name server (leave the key out to use /etc/resolv.conf)")
        }
        return ResolverConfig(nameservers: nameservers.flatMap { $0.isEmpty ? nil : $0 },
                              timeout: m?["timeout"].flatMap { d.duration($0) } ?? .seconds(1))
    }

    /// `ip`, `ip:port` or `[ipv6]:port`, as evdns takes a name server.
    private static func isNameserver(_ text: String) -> Bool {
        if IPAddress(text) != nil { return true }
        guard let parts = HostName.splitHostPort(Substring(text)), IPAddress(parts.host) != nil,
              let port = parts.port, let number = HostName.parsePort(port) else { return false }
        return number > 0
    }

    private static func decodeLog(_ field: ConfigField?, _ d: ConfigDecoder) -> LogConfig {
        let m = sub(field, Keys.log, d)
        return LogConfig(format: m?["format"].flatMap { d.oneOf($0, LogFormat.self) } ?? .json,
                         level: m?["level"].flatMap { d.oneOf($0, LogLevel.self) } ?? .info,
                         accessLog: m?["access_log"].flatMap { d.bool($0) } ?? true)
    }
}

/// Resolves paths named in `gateway.yaml` and checks the files can be opened when serving.
struct ReferencedFiles {
    let decoder: ConfigDecoder
    let directory: String

    func resolve(_ path: String) -> String {
        ConfigFiles.resolve(path, against: directory)
    }

    /// The resolved path of an existing, readable file; contents are checked by whoever uses it.
    func existing(_ field: ConfigField, what: String) -> String? {
        guard let path = decoder.string(field) else { return nil }
        let resolved = resolve(path)
        if let reason = ConfigFiles.unreadableReason(resolved) {
            decoder.report(field, "\(what) \(ConfigDecoder.quoted(resolved)) \(reason)")
            return nil
        }
        return resolved
    }
}
