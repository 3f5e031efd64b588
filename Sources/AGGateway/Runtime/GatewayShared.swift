#if canImport(Glibc)
import Glibc
#endif
import AGConfig
import AGPolicy
import AGEventLoop
import AGHTTP
import Dispatch
import Foundation
import AGSync

/// What all workers share: the snapshot in force, metrics, the logger, the control loop.
final class GatewayShared: Sendable {
    let configPath: String
    let snapshots: SnapshotStore
    let metrics: MetricsRegistry
    let logger: Logger
    /// Where access log lines go (stdout by default).
    let accessLog: Logger
    /// Runs reloads and other slow work away from the request loops.
    let control: EventLoop
    /// Tiers as changed at runtime through the admin API, kept in sync by `TierSync`.
    let tierStore = TierStore()
    /// "Now" for every decision: the Redis-aligned clock, or the one a test injects.
    let time: any TimeSource
    /// The in-process buckets `api` limiting falls back to while Redis is down (per instance).
    let localBuckets: LocalBuckets
    /// The store epoch this instance remembers and the resets it noticed.
    let storeEpoch = StoreEpoch()
    /// The logger with repeated lines rate-limited (request paths, reconnect attempts).
    let throttledLogger: ThrottledLogSink
    /// The public listener's TLS context, when it was started with `server.tls`.
    let listenerTLS: ListenerTLS?
    /// The configuration the process started with: what the restart-only settings still are.
    private let running: GatewayConfig
    private let reloadGeneration: Locked<Int>

    init(configPath: String, snapshot: GatewaySnapshot, logger: Logger, accessLog: Logger, control: EventLoop,
         time: any TimeSource) {
        self.configPath = configPath
        self.time = time
        self.localBuckets = LocalBuckets(time: time)
        self.accessLog = accessLog
        self.snapshots = SnapshotStore(snapshot)
        self.metrics = MetricsRegistry()
        self.logger = logger
        self.throttledLogger = ThrottledLogSink(base: logger, throttle: LogThrottle(time: time))
        self.control = control
        self.reloadGeneration = Locked(snapshot.generation)
        self.running = snapshot.gateway
        self.listenerTLS = snapshot.serverTLS.map(ListenerTLS.init)
    }

    /// Re-reads every configuration file; on success swaps the snapshot, otherwise keeps the
    /// old one and logs each problem. Safe from any thread; reloads are serialized.
    func reload(trigger: String) -> Result<Int, ConfigError> {
        reloadGeneration.withLock { generation in
            let started = ContinuousClock.now
            do throws(ConfigError) {
                let config = try ConfigLoader.load(path: configPath)
                let snapshot = try GatewaySnapshot(config: config, generation: generation + 1, adminToken: AdminToken.load(config.gateway))
                // Against what the process runs with, not the previous file: a value changed
                // back needs no restart, and one still changed is named at every reload.
                for (name, old, new) in Self.restartOnlySettings(running, config.gateway) where old != new {
                    logger.warn("setting changed on reload takes effect after a restart", [("key", .string(name))])
                }
                generation += 1
                snapshots.replace(snapshot)
                if let listenerTLS, let context = snapshot.serverTLS, let files = config.gateway.server.tls {
                    // New connections get the new certificate; open ones keep theirs.
                    listenerTLS.replace(context)
                    context.logLoaded(logger, files: files, now: time.nowMilliseconds / 1000)
                }
                snapshot.warnIfTestCATrusted(logger)
                for (appID, tier) in tierStore.overridesNamingNoTier(fileTiers: config.gateway.tiers) {
                    logger.warn("tenant tier override names no tier: the tenant file's tier applies",
                                [("tenant", .string(appID)), ("tier", .string(tier))])
                }
                metrics.increment(MetricsRegistry.reloadsOK)
                logger.info("configuration reloaded", [
                    ("trigger", .string(trigger)), ("generation", .int(generation)),
                    ("tenants", .int(config.tenants.all.count)),
                    ("durationMs", .double((ContinuousClock.now - started).seconds * 1000)),
                ])
                return .success(generation)
            } catch {
                metrics.increment(MetricsRegistry.reloadsRejected)
                for line in error.lines {
                    logger.error("configuration rejected, previous one stays in force", [("trigger", .string(trigger)), ("problem", .string(line))])
                }
                return .failure(error)
            }
        }
    }

    /// Settings read once, when the listeners, workers, connections and logger are built; a
    /// reload that changes one says so instead of ignoring it silently.
    static func restartOnlySettings(_ a: GatewayConfig, _ b: GatewayConfig) -> [(String, String, String)] {
        [
            ("server.listen", a.server.listen.description, b.server.listen.description),
            ("server.workers", String(a.server.workers), String(b.server.workers)),
            // Split over the workers when they start.
            ("server.max_connections", String(a.server.maxConnections), String(b.server.maxConnections)),
            // Each worker's HTTP servers take these when they start.
            ("server.timeouts.read", "\(a.server.timeouts.read)", "\(b.server.timeouts.read)"),
            ("server.timeouts.header", "\(a.server.timeouts.header)", "\(b.server.timeouts.header)"),
            ("server.timeouts.body_min_rate", "\(a.server.timeouts.bodyMinRate)", "\(b.server.timeouts.bodyMinRate)"),
            ("server.timeouts.body_rate_window", "\(a.server.timeouts.bodyRateWindow)", "\(b.server.timeouts.bodyRateWindow)"),
            ("server.timeouts.write", "\(a.server.timeouts.write)", "\(b.server.timeouts.write)"),
            ("server.timeouts.idle", "\(a.server.timeouts.idle)", "\(b.server.timeouts.idle)"),
            // Each worker's TLS listener takes its handshake deadline when it is built.
            ("server.timeouts.tls_handshake", "\(a.server.timeouts.tlsHandshake)", "\(b.server.timeouts.tlsHandshake)"),
            ("admin.listen", a.admin.listen.description, b.admin.listen.description),
            // The URLs themselves, credentials included: their descriptions spell a password
            // `***`, and a rotated one is a change (only the key's name is ever logged).
            ("redis.url", a.redis.url.description, a.redis.url == b.redis.url ? a.redis.url.description : b.redis.url.description + " (credentials changed)"),
            // Every Redis connection is made with it.
            ("redis.timeout", "\(a.redis.timeout)", "\(b.redis.timeout)"),
            // Each worker's device store takes them when it is built.
            ("redis.wait_replicas", String(a.redis.waitReplicas), String(b.redis.waitReplicas)),
            ("redis.wait_timeout", "\(a.redis.waitTimeout)", "\(b.redis.waitTimeout)"),
            // The logger is built once; the access log switch (log.access_log) is read per request.
            ("log.format", a.log.format.rawValue, b.log.format.rawValue),
            ("log.level", a.log.level.rawValue, b.log.level.rawValue),
            // A reload reads the new directory, but the watcher keeps watching the old one.
            ("tenants_dir", a.tenantsDirectory, b.tenantsDirectory),
            // Certificates reload; turning TLS on or off needs a restart (ListenerTLS says why).
            ("server.tls", a.server.tls == nil ? "off" : "on", b.server.tls == nil ? "off" : "on"),
            ("resolver", "\(a.resolver)", "\(b.resolver)"),
        ]
    }
}

extension RedisConfig {
    /// Timeout of the background connections (events stream readers, tier sync, clock
    /// alignment): a request path's tight `redis.timeout` would make a busy Redis tear them
    /// down and rebuild them, for no gain.
    var backgroundTimeout: Duration { max(timeout * 4, .seconds(1)) }
}

/// Reads the admin bearer token: the environment variable wins over the file.
enum AdminToken {
    static func load(_ config: GatewayConfig) -> String? {
        if let name = config.admin.tokenEnvironmentVariable,
           let value = ProcessInfo.processInfo.environment[name].flatMap({ AdminConfig.token(trimming: $0) }) {
            return value
        }
        return config.admin.tokenFile.flatMap(AdminConfig.token(inFile:))
    }
}
