public import AGRedis
/// The validated contents of `gateway.yaml`, with every default filled in and every relative
/// path resolved against the directory of `gateway.yaml`.
public struct GatewayConfig: Sendable {
    /// `gateway.yaml` as it was found (a directory given to the loader becomes `dir/gateway.yaml`).
    public let sourcePath: String
    public let server: ServerConfig
    public let admin: AdminConfig
    public let redis: RedisConfig
    public let tokens: TokenConfig
    public let challenge: ChallengeConfig
    /// Every tier by name: the four built-in ones (possibly changed) plus any the file adds.
    public let tiers: [String: RateTier]
    public let ipLimits: IPLimitConfig
    public let rateLimits: RateLimitConfig
    public let proxy: ProxyConfig
    public let quotas: QuotaConfig
    public let appAttest: AppAttestConfig
    /// Resolved `tenants_dir`.
    public let tenantsDirectory: String
    public let log: LogConfig
    public let resolver: ResolverConfig
}

/// `server`: the public listener.
public struct ServerConfig: Sendable, Hashable {
    public let listen: ListenAddress
    /// 0 means one worker per CPU core; see `workerCount(cpuCores:)`.
    public let workers: Int
    /// Client connections the instance holds open at most on the public listener; 0 means
    /// half the open-files limit, see `connectionLimit(descriptorLimit:)`.
    public let maxConnections: Int
    /// Largest JSON body accepted by the gateway's own endpoints.
    public let maxBodyBytes: Int
    /// Largest request body proxied to an upstream.
    public let maxProxyBodyBytes: Int
    public let timeouts: ServerTimeouts
    public let shutdownGrace: Duration
    /// Peers whose `X-Forwarded-For` is believed.
    public let trustedProxies: [CIDRBlock]
    public let tls: TLSFiles?

    /// Workers to start on a machine with `cpuCores` cores.
    public func workerCount(cpuCores: Int) -> Int {
        workers > 0 ? workers : max(1, cpuCores)
    }

    /// The instance's cap on public client connections under an open-files limit of
    /// `descriptorLimit` when the process needs `reserved` descriptors of its own (listeners,
    /// event loops, Redis, logs): the configured one, else half of what is left, so that each
    /// client connection can have the upstream connection a proxied request needs (HAProxy
    /// derives its default `maxconn` from `ulimit -n` the same way). Half the limit alone, the
    /// first default, left the process's own descriptors out: an independent sweep had 21 of
    /// 64 proxied requests fail on `EMFILE` under a 128-descriptor limit.
    public func connectionLimit(descriptorLimit: Int, reserved: Int = 0) -> Int {
        maxConnections > 0 ? maxConnections : max(1, (descriptorLimit - reserved) / 2)
    }

    /// Descriptors a gateway with `workers` workers needs besides its connections, when
    /// `openNow` are open before the workers start: each worker's event loop, wake-up pipe,
    /// Redis connections and resolver (8 measured; 12 counted), and a few for files and the
    /// control loop's Redis connections.
    public static func reservedDescriptors(openNow: Int, workers: Int) -> Int {
        openNow + 12 * workers + 16
    }

    /// One worker's share of `limit`: each worker has its own listening socket, so the cap is
    /// split evenly, rounded up.
    public static func connectionsPerWorker(_ limit: Int, workers: Int) -> Int {
        let workers = max(1, workers)
        return (limit + workers - 1) / workers
    }

    /// Whether `address` is in `trusted_proxies` (its `X-Forwarded-*` are believed).
    public func trusts(_ address: IPAddress) -> Bool {
        !trustedProxies.isEmpty && trustedProxies.contains { $0.contains(address) }
    }

    /// `trusts` for a peer address as text; not parsed at all when no proxy is trusted.
    public func trusts(peer: String) -> Bool {
        !trustedProxies.isEmpty && (IPAddress(peer).map(trusts) ?? false)
    }

    /// The client's address for per-IP limits: `peer`, or, when `peer` is a trusted proxy, the
    /// nearest untrusted address of `X-Forwarded-For` (`forwardedFor`: its field lines in
    /// order). The list is walked from the right — each trusted hop appended the address it
    /// saw — over addresses and `address:port` / `[v6]:port` entries, skipping empty list
    /// elements (RFC 9110 section 5.6.1). An entry that is no address ends the walk at the hop
    /// that wrote it (the nearest address known, as nginx's realip does): never an entry further
    /// left, which the client itself may have written.
    public func clientAddress(peer: IPAddress, forwardedFor: [String]) -> IPAddress {
        guard trusts(peer) else { return peer }
        var nearest = peer
        // Split and trimmed on bytes, never on Characters: a comma after a combining or
        // prepended code point (U+0600) is part of one grapheme cluster, and the client's own
        // element would swallow the separator the proxy wrote after it.
        let comma = UInt8(ascii: ","), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        for line in forwardedFor.reversed() {
            for element in line.utf8.split(separator: comma, omittingEmptySubsequences: false).reversed() {
                var entry = element.drop { $0 == space || $0 == tab }
                while let last = entry.last, last == space || last == tab { entry.removeLast() }
                guard !entry.isEmpty else { continue }
                guard let address = IPAddress(forwardedEntry: Substring(entry)) else { return nearest }
                guard trusts(address) else { return address }
                nearest = address
            }
        }
        return nearest
    }
}

/// `server.timeouts`.
public struct ServerTimeouts: Sendable, Hashable {
    public let read: Duration
    /// Deadline for a whole request head from its first byte (`timeouts.header`).
    public let header: Duration
    /// Least body rate in bytes per second over each `bodyRateWindow`; 0 turns the check off.
    public let bodyMinRate: Int
    public let bodyRateWindow: Duration
    public let write: Duration
    /// Keep-alive idle time of client connections.
    public let idle: Duration
    public let upstreamConnect: Duration
    public let upstreamResponse: Duration
    /// Deadline for a client's whole TLS handshake, from accept (`timeouts.tls_handshake`).
    public let tlsHandshake: Duration
}

/// `server.tls`: PEM certificate chain and private key (resolved paths, checked readable;
/// their contents are checked when a snapshot is built, and reported at these locations).
public struct TLSFiles: Sendable, Hashable {
    public let certificateFile: String
    public let keyFile: String
    public let certificateLocation: ConfigLocation
    public let keyLocation: ConfigLocation

    public init(certificateFile: String, keyFile: String, certificateLocation: ConfigLocation, keyLocation: ConfigLocation) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.certificateLocation = certificateLocation
        self.keyLocation = keyLocation
    }
}

/// `resolver`: how host names (upstreams, Redis) are resolved; restart-only.
public struct ResolverConfig: Sendable, Hashable {
    /// `ip` or `ip:port` of the name servers; `nil` uses /etc/resolv.conf's.
    public let nameservers: [String]?
    /// The longest one lookup may take, its one retry included (each try gets half).
    public let timeout: Duration
}

/// `admin`: the admin listener and where its bearer token comes from.
public struct AdminConfig: Sendable, Hashable {
    public let listen: ListenAddress
    /// Resolved path; `nil` when only `token_env` is configured.
    public let tokenFile: String?
    /// Name of an environment variable holding the token.
    public let tokenEnvironmentVariable: String?

    /// The token a token file holds: its contents without surrounding whitespace; `nil` when
    /// it cannot be read or holds nothing else.
    public static func token(inFile path: String) -> String? {
        guard case .success(let bytes) = ConfigFiles.read(path) else { return nil }
        return token(trimming: String(decoding: bytes, as: UTF8.self))
    }

    /// A token as written in a file or an environment variable: surrounding whitespace (the
    /// newline a file, or a Kubernetes secret made from one, ends with) is not part of it; nil
    /// when nothing else is there.
    public static func token(trimming text: String) -> String? {
        var token = Substring(text).drop(while: \.isWhitespace)
        while token.last?.isWhitespace == true { token.removeLast() }
        return token.isEmpty ? nil : String(token)
    }
}

/// `redis`.
public struct RedisConfig: Sendable, Hashable {
    public let url: RedisURL
    /// Per-command timeout.
    public let timeout: Duration
    /// Replicas that must acknowledge the commit scripts' writes (`WAIT`) before the answer;
    /// 0 answers as soon as the primary applied them.
    public let waitReplicas: Int
    /// How long that `WAIT` may take (below `timeout`).
    public let waitTimeout: Duration
}

/// `tokens`: the JWTs the gateway mints and verifies.
public struct TokenConfig: Sendable, Hashable {
    public let issuer: String
    public let ttl: Duration
    /// Clock skew tolerated on `exp`/`nbf`.
    public let leeway: Duration
    /// In file order; exactly one is active.
    public let keys: [TokenKeyConfig]
}

/// Signature algorithm of a token key.
public enum TokenAlgorithm: String, Sendable, Hashable, CaseIterable {
    case es256 = "ES256"
    case rs256 = "RS256"
}

/// One entry of `tokens.keys`.
public struct TokenKeyConfig: Sendable, Hashable {
    public let kid: String
    public let algorithm: TokenAlgorithm
    /// Resolved path of the PEM private key (checked readable, not parsed).
    public let file: String
    public let isActive: Bool
    /// Where `file` was written, for a key that does not parse when the snapshot is built.
    public let location: ConfigLocation
}

/// `challenge`.
public struct ChallengeConfig: Sendable, Hashable {
    public let ttl: Duration
}

/// Monthly-active-device limit of a tier.
public enum DeviceLimit: Sendable, Hashable {
    case limited(Int)
    case unlimited
}

/// A rate tier: per-minute bucket sizes and the monthly-active-device limit.
public struct RateTier: Sendable, Hashable {
    /// The largest per-minute limit a bucket keeps exactly (every intermediate value of the
    /// token bucket an exact double in Lua); larger numbers are refused, in files and through
    /// the admin API alike.
    public static let maximumLimitPerMinute = 100_000_000

    public let name: String
    public let attest: Int
    public let challenge: Int
    public let api: Int
    public let madLimit: DeviceLimit

    public init(name: String, attest: Int, challenge: Int, api: Int, madLimit: DeviceLimit) {
        self.name = name
        self.attest = attest
        self.challenge = challenge
        self.api = api
        self.madLimit = madLimit
    }

    /// The tiers every gateway has unless `tiers` changes them.
    public static let builtIn: [String: RateTier] = [
        "free": RateTier(name: "free", attest: 30, challenge: 60, api: 600, madLimit: .limited(1_000)),
        "pro": RateTier(name: "pro", attest: 500, challenge: 1_000, api: 10_000, madLimit: .limited(25_000)),
        "business": RateTier(name: "business", attest: 2_000, challenge: 4_000, api: 40_000,
                             madLimit: .limited(250_000)),
        "enterprise": RateTier(name: "enterprise", attest: 10_000, challenge: 20_000, api: 200_000,
                               madLimit: .unlimited),
    ]
}

/// `ip_limits`: per-client-IP buckets, per minute.
public struct IPLimitConfig: Sendable, Hashable {
    public let challenge: Int
    public let validate: Int
    /// Platform SSO server nonces (`POST {path_prefix}/nonce`).
    public let pssoNonce: Int

    public init(challenge: Int, validate: Int, pssoNonce: Int = 120) {
        self.challenge = challenge
        self.validate = validate
        self.pssoNonce = pssoNonce
    }
}

/// What proxied `api` limiting does while Redis is unreachable.
public enum StoreErrorPolicy: String, Sendable, Hashable, CaseIterable {
    /// Fall back to an in-process bucket per instance.
    case local
    case allow
    case deny
}

/// `rate_limits`.
public struct RateLimitConfig: Sendable, Hashable {
    public let onStoreError: StoreErrorPolicy
}

/// What a proxied request with a valid token gets while its device record cannot be read.
public enum UnverifiedTokenPolicy: String, Sendable, Hashable, CaseIterable {
    /// 503 `store_unavailable`: a revoked device is never let through.
    case deny
    /// Proxied, unless this instance heard the device was revoked.
    case allow
}

/// `proxy`.
public struct ProxyConfig: Sendable, Hashable {
    public let unverifiedTokenPolicy: UnverifiedTokenPolicy
    /// Idle keep-alive connections each worker keeps per upstream address; a connection
    /// released beyond it closes the pool's oldest idle one. Read per request (reloadable).
    public let upstreamKeepalive: Int

    public static let defaultUpstreamKeepalive = 256
}

/// `quotas`: monthly-active-device accounting.
public struct QuotaConfig: Sendable, Hashable {
    /// How long new devices still pass once `mad_limit` is reached.
    public let grace: Duration
    /// Usage ratio logged once as a warning.
    public let warnRatio: Double
}

/// `app_attest`: trust roots (resolved paths, checked readable).
public struct AppAttestConfig: Sendable, Hashable {
    public let rootCAFile: String
    /// An extra CA for simulator and CI attestations.
    public let testCAFile: String?
    /// Whether `environment: production` tenants may coexist with a test CA.
    public let allowTestCA: Bool
    /// Where each file was named (the root CA's default: the `app_attest` section, or line 1),
    /// for a certificate that does not parse when the snapshot is built.
    public let rootCALocation: ConfigLocation
    public let testCALocation: ConfigLocation?
}

/// `log.format`: one JSON object per line, or human-readable text.
public enum LogFormat: String, Sendable, Hashable, CaseIterable {
    case json, text
}

/// `log.level`: the least severe level written.
public enum LogLevel: String, Sendable, Hashable, CaseIterable {
    case debug, info, warn, error
}

/// `log`.
public struct LogConfig: Sendable, Hashable {
    public let format: LogFormat
    public let level: LogLevel
    public let accessLog: Bool
}
