#if canImport(Glibc)
import AGConfig
import Glibc
#endif
import AGEventLoop
import AGHTTP
import AGRedis

/// One event loop thread: the public and admin servers, a Redis connection, and the handlers.
///
/// Everything here is created and used on the worker's own thread, so the request path
/// takes no locks beyond reading the current snapshot.
final class Worker {
    let index: Int
    let loop: EventLoop
    let shared: GatewayShared
    let metrics: WorkerMetrics
    let accessLog: AccessLogBuffer
    /// New request ids (unique, not secret).
    var requestIDs = RequestIDGenerator()
    let redis: RedisClient
    let challenges: ChallengeStore
    let devices: DeviceStore
    let rateLimiter: RateLimiter
    /// Keep-alive connections to tenant upstreams.
    let upstreams: UpstreamPool
    /// Signature-verified proxy tokens, so a repeated token costs no signature check.
    let tokenCache = TokenCache()
    /// Revoked devices, fed by this worker's own `ag:events` subscription.
    let revocations: RevocationWatcher
    private var publicServer: HTTPServer?
    private var adminServer: HTTPServer?
    private lazy var publicRouter = PublicRouter(worker: self)
    private lazy var adminRouter = AdminRouter(worker: self)
    lazy var proxyHandler = ProxyHandler(worker: self)

    init(index: Int, loop: EventLoop, shared: GatewayShared, publicSocket: ListeningSocket, adminSocket: ListeningSocket) {
        self.index = index
        self.loop = loop
        self.shared = shared
        self.metrics = shared.metrics.makeWorkerMetrics()
        let snapshot = shared.snapshots.snapshot
        self.accessLog = AccessLogBuffer(loop: loop, sink: shared.accessLog)
        self.redis = RedisClient(url: snapshot.gateway.redis.url, loop: loop, timeout: snapshot.gateway.redis.timeout)
        self.challenges = ChallengeStore(redis: redis)
        self.devices = DeviceStore(redis: redis)
        let workerMetrics = metrics
        self.rateLimiter = RateLimiter(redis: redis, localBuckets: shared.localBuckets, logger: shared.logger) { mode in
            workerMetrics.increment("attestgate_ratelimit_mode_switches_total{mode=\"\(mode.rawValue)\"}")
        }
        self.upstreams = UpstreamPool(loop: loop)
        let snapshots = shared.snapshots
        self.revocations = RevocationWatcher(url: snapshot.gateway.redis.url, loop: loop,
                                             channel: GatewayEvents.channel, timeout: snapshot.gateway.redis.subscriptionTimeout,
                                             logger: shared.logger) {
            snapshots.snapshot.longestTokenLifetime
        }
        let timeouts = snapshot.gateway.server.timeouts
        var configuration = HTTPServerConfiguration()
        configuration.readTimeout = timeouts.read
        configuration.headerTimeout = timeouts.header
        configuration.bodyMinRate = timeouts.bodyMinRate
        configuration.bodyRateWindow = timeouts.bodyRateWindow
        configuration.writeTimeout = timeouts.write
        configuration.idleTimeout = timeouts.idle
        let logger = shared.logger
        let workerIndex = index
        publicServer = HTTPServer(loop: loop, socket: publicSocket, configuration: configuration,
                                  delegate: serverDelegate(listener: "public")) { [unowned self] request in
            self.publicRouter.handle(request)
        }
        // The admin listener accepts through the reserved descriptor when the process is out of them.
        configuration.usesReservedDescriptor = true
        adminServer = HTTPServer(loop: loop, socket: adminSocket, configuration: configuration,
                                 delegate: serverDelegate(listener: "admin")) { [unowned self] request in
            self.adminRouter.handle(request)
        }
        redis.onStateChange = { state in
            switch state {
            case .connected: logger.info("redis connected", [("worker", .int(workerIndex))])
            case .disconnected: logger.warn("redis disconnected", [("worker", .int(workerIndex))])
            case .connecting, .closed: break
            }
        }
    }

    /// What the HTTP layer hands back: its own refusals (answered with the gateway's envelope,
    /// request id and access-log line) and accept pauses at the descriptor limit.
    private func serverDelegate(listener: String) -> HTTPServerDelegate {
        let logger = shared.logger
        let workerIndex = index
        return HTTPServerDelegate(localReply: { [unowned self] request, error in
            let context = RequestContext(request: request, snapshot: self.shared.snapshots.snapshot, worker: self)
            context.route = "local"
            context.fail(GatewayError(status: error.status, code: error.code, message: error.message))
        }, acceptFailed: { code, failures in
            logger.warn("accepting paused: out of file descriptors",
                        [("listener", .string(listener)), ("worker", .int(workerIndex)), ("errno", .int(Int(code))),
                         ("failures", .int(failures))])
        })
    }

    /// Stops accepting, lets in-flight requests finish within `grace`, then stops the loop.
    func shutdown(grace: Duration) {
        let group = ShutdownGroup(count: 2) { [self] in
            accessLog.flush()
            redis.close()
            revocations.close()
            upstreams.closeIdleConnections()
            loop.stop()
        }
        publicServer?.shutdown(grace: grace) { group.done() }
        adminServer?.shutdown(grace: grace) { group.done() }
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
