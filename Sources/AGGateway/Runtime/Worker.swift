import AGConfig
import AGCrypto
import AGEventLoop
import AGHTTP
import AGPolicy
import AGRedis

/// One event loop thread: the public and admin servers, a Redis connection, and the services
/// its handlers use.
///
/// Everything here is created and used on the worker's own thread. The request path takes
/// no locks but uncontended ones: reading the current snapshot and the tier overrides, and
/// the worker's own metrics (which a scrape also reads).
final class Worker {
    let index: Int
    let loop: EventLoop
    let shared: GatewayShared
    let redis: RedisClient
    private let accessLog: AccessLogBuffer
    private let upstreams: UpstreamPool
    private let revocations: RevocationWatcher
    private var publicServer: HTTPServer?
    private var adminServer: HTTPServer?

    /// `maxConnections`: this worker's share of the instance's cap on public connections.
    init(index: Int, loop: EventLoop, shared: GatewayShared, publicSocket: ListeningSocket, adminSocket: ListeningSocket,
         maxConnections: Int) {
        self.index = index
        self.loop = loop
        self.shared = shared
        let snapshot = shared.snapshots.snapshot
        let metrics = shared.metrics.makeWorkerMetrics()
        Self.installResolver(snapshot.gateway.resolver, on: loop, logger: shared.logger)
        accessLog = AccessLogBuffer(loop: loop, sink: shared.accessLog)
        redis = RedisClient(url: snapshot.gateway.redis.url, loop: loop, timeout: snapshot.gateway.redis.timeout)
        upstreams = UpstreamPool(loop: loop)
        let snapshots = shared.snapshots
        revocations = RevocationWatcher(url: snapshot.gateway.redis.url, loop: loop, timeout: snapshot.gateway.redis.backgroundTimeout,
                                        logger: shared.logger) {
            snapshots.snapshot.longestTokenLifetime
        }
        let rateLimiter = RateLimiter(redis: redis, localBuckets: shared.localBuckets, time: shared.time,
                                      logger: shared.logger) { mode in
            metrics.increment("attestgate_ratelimit_mode_switches_total{mode=\"\(mode.rawValue)\"}")
        }
        let devices = RedisDeviceStore(redis: redis, time: shared.time, waitReplicas: snapshot.gateway.redis.waitReplicas,
                                       waitTimeout: snapshot.gateway.redis.waitTimeout)
        let random = SecureRandomBuffer()
        let services = RouteServices(
            snapshots: shared.snapshots, time: shared.time, devices: devices, deviceAdmin: devices,
            challenges: RedisChallengeStore(redis: redis, time: shared.time, random: random),
            platformSSO: RedisPlatformSSOStore(redis: redis, time: shared.time, random: random,
                                               waitReplicas: snapshot.gateway.redis.waitReplicas,
                                               waitTimeout: snapshot.gateway.redis.waitTimeout), limiter: rateLimiter,
            tiers: RedisTierAdministration(store: shared.tierStore, redis: redis), revocations: revocations,
            forwarder: UpstreamForwarder(upstreams: upstreams), readiness: RedisHealth(redis: redis, epoch: shared.storeEpoch),
            reloader: ControlLoopReloader(shared: shared, loop: loop), metrics: metrics,
            metricsText: { [registry = shared.metrics] in registry.render() }, logger: shared.throttledLogger, accessLog: accessLog,
            tokenCache: TokenCache(), deviceKeys: DeviceKeyCache(), requestIDs: RequestIDSource(), random: random)
        let timeouts = snapshot.gateway.server.timeouts
        var configuration = HTTPServerConfiguration()
        configuration.readTimeout = timeouts.read
        configuration.headerTimeout = timeouts.header
        configuration.bodyMinRate = timeouts.bodyMinRate
        configuration.bodyRateWindow = timeouts.bodyRateWindow
        configuration.writeTimeout = timeouts.write
        configuration.idleTimeout = timeouts.idle
        configuration.maxConnections = maxConnections
        let logger = shared.throttledLogger
        let workerIndex = index
        let publicRouter = PublicRouter(services: services)
        let adminRouter = AdminRouter(services: services)
        publicServer = HTTPServer(loop: loop, socket: publicSocket, configuration: configuration,
                                  delegate: Self.serverDelegate(listener: "public", index: index, services: services),
                                  tls: Self.listenerTLS(shared, timeouts: timeouts)) { request in
            publicRouter.handle(request)
        }
        // The admin listener accepts through the reserved descriptor when the process is out of
        // them, and is not capped: operators reach metrics and the admin API at the cap.
        configuration.usesReservedDescriptor = true
        configuration.maxConnections = 0
        adminServer = HTTPServer(loop: loop, socket: adminSocket, configuration: configuration,
                                 delegate: Self.serverDelegate(listener: "admin", index: index, services: services)) { request in
            adminRouter.handle(request)
        }
        redis.onStateChange = { state in
            switch state {
            case .connected: logger.info("redis connected", [("worker", .int(workerIndex))])
            // Once per failed reconnect attempt while Redis is down: throttled.
            case .disconnected:
                logger.logRepeated(.warn, "redis disconnected", key: "redis disconnected/\(workerIndex)", [("worker", .int(workerIndex))])
            case .connecting, .closed: break
            }
        }
    }

    /// What the HTTP layer hands back: its own refusals (answered with the gateway's envelope,
    /// request id and access-log line), accept pauses at the descriptor limit, TLS handshakes.
    private static func serverDelegate(listener: String, index: Int, services: RouteServices) -> HTTPServerDelegate {
        let logger = services.logger
        let metrics = services.metrics
        let workerIndex = index
        var delegate = HTTPServerDelegate(localReply: { request, error in
            let context = RequestContext(request: request, services: services)
            context.route = "local"
            context.fail(GatewayError(status: error.status, code: error.code, message: error.message))
        }, acceptFailed: { code, failures in
            logger.warn("accepting paused: out of file descriptors",
                        [("listener", .string(listener)), ("worker", .int(workerIndex)), ("errno", .int(Int(code))),
                         ("failures", .int(failures))])
        })
        delegate.connectionLimitReached = { pauses in
            logger.warn("accepting paused: connection limit reached",
                        [("listener", .string(listener)), ("worker", .int(workerIndex)), ("pauses", .int(pauses))])
        }
        delegate.tlsHandshakeFailed = { failure in
            metrics.increment(TLSHandshakeSeries.failures[failure.reason] ?? "attestgate_tls_handshake_failures_total")
            logger.debug("TLS handshake failed", [("reason", .string(failure.reason.rawValue)), ("detail", .string(failure.detail))])
        }
        delegate.tlsHandshakeCompleted = { version in metrics.increment(TLSHandshakeSeries.completed(version)) }
        return delegate
    }

    /// Stops accepting, lets in-flight requests finish within `grace`, then stops the loop.
    /// The access log is flushed once the loop has stopped (`loopStopped`): the last
    /// connection closes before its request's line is added.
    func shutdown(grace: Duration) {
        let group = ShutdownGroup(count: 2) { [self] in
            redis.close()
            revocations.close()
            upstreams.closeIdleConnections()
            loop.stop()
        }
        publicServer?.shutdown(grace: grace) { group.done() }
        adminServer?.shutdown(grace: grace) { group.done() }
    }

    /// After the loop returned, on its thread: the access-log lines still buffered are written.
    func loopStopped() {
        accessLog.flush()
    }
}

/// `/readyz`: Redis answers a `PING` on this worker's connection; resets come from the
/// instance's `StoreEpoch`.
final class RedisHealth: StoreHealth {
    private let redis: RedisClient
    private let epoch: StoreEpoch

    init(redis: RedisClient, epoch: StoreEpoch) {
        self.redis = redis
        self.epoch = epoch
    }

    var unacknowledgedResets: [StoreEpoch.Reset] { epoch.unacknowledgedResets }

    func acknowledgeResets() -> Int { epoch.acknowledge() }

    func check(completion: @escaping (Bool) -> Void) {
        guard redis.isConnected else { return completion(false) }
        redis.send(["PING"]) { result in
            if case .success = result { completion(true) } else { completion(false) }
        }
    }
}

/// Reloads on the control thread (off the request loops) and completes on `loop`.
final class ControlLoopReloader: ConfigReloader {
    private let shared: GatewayShared
    private let loop: EventLoop

    init(shared: GatewayShared, loop: EventLoop) {
        self.shared = shared
        self.loop = loop
    }

    func reload(completion: @escaping (Result<Int, ConfigError>) -> Void) {
        let loop = self.loop
        let shared = self.shared
        let box = LoopBound(completion, loop: loop)
        shared.control.execute {
            let outcome = shared.reload(trigger: "admin")
            loop.execute { box.value(outcome) }
        }
    }
}

/// Calls `completion` after `done()` was called `count` times.
final class ShutdownGroup {
    private var remaining: Int
    private let completion: () -> Void

    init(count: Int, completion: @escaping () -> Void) {
        remaining = count
        self.completion = completion
    }

    func done() {
        remaining -= 1
        if remaining == 0 { completion() }
    }
}
