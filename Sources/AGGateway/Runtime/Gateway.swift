#if canImport(Glibc)
import Glibc
#endif
import AGCrypto
import AGConfig
import AGPolicy
import AGEventLoop
import AGHTTP
import Dispatch
import Foundation
import AGSync

/// The running gateway: N worker threads serving one public and one admin socket, plus a
/// control thread for reloads, signals and watching `tenants/`.
public final class Gateway: Sendable {
    let shared: GatewayShared
    public let publicPort: Int
    public let adminPort: Int
    private let workerLoops: [EventLoop]
    private let sockets: [ListeningSocket]
    private let stopped = DispatchGroup()
    private let stopping = Locked(false)
    private let socketsClosed = Locked(false)

    public enum StartError: Error, CustomStringConvertible {
        case config(ConfigError)
        case bind(String)

        public var description: String {
            switch self {
            case .config(let error): error.description
            case .bind(let message): message
            }
        }
    }

    /// Loads the configuration at `configPath`, binds the listeners and starts the workers.
    /// `logger` and `accessLog` default to stderr and stdout in the configured format; `time`
    /// defaults to the host clock aligned on the Redis clock (tests pass a controlled one).
    public init(configPath: String, logger: Logger? = nil, accessLog: Logger? = nil,
                time: (any TimeSource)? = nil) throws(StartError) {
        // libevent writes with writev, which raises SIGPIPE when a client or upstream has gone;
        // the write error is handled, so the signal must not kill the process.
        signal(SIGPIPE, SIG_IGN)
        let config: LoadedConfig
        let snapshot: GatewaySnapshot
        do {
            config = try ConfigLoader.load(path: configPath)
            snapshot = try GatewaySnapshot(config: config, generation: 1, adminToken: AdminToken.load(config.gateway))
        } catch {
            throw .config(error)
        }
        // Taken right after reading the files (not later on the control loop), so the watcher
        // notices any change made once startup has read them.
        let tenantFiles = TenantDirectoryWatcher.signature(of: config.gateway.tenantsDirectory)
        let gateway = config.gateway
        let logger = logger ?? Logger(level: Logger.Level(gateway.log.level), format: gateway.log.format == .json ? .json : .text)
        LibeventLog.install { severity, message, suppressed in
            let fields: [(String, LogValue)] = [("message", .string(message)), ("suppressed", .int(suppressed))]
            if severity >= 3 { logger.error("libevent", fields) } else { logger.warn("libevent", fields) }
        }
        let workerCount = gateway.server.workerCount(cpuCores: ProcessInfo.processInfo.activeProcessorCount)
        let publicSockets: [ListeningSocket]
        let adminSocket: ListeningSocket
        do {
            // One public socket per worker (a reuse-port group), so connections spread evenly;
            // the admin listener stays one socket shared by the workers.
            publicSockets = try ListeningSocket.bindGroup(host: gateway.server.listen.host, port: gateway.server.listen.port,
                                                          count: workerCount)
            adminSocket = try ListeningSocket.bind(host: gateway.admin.listen.host, port: gateway.admin.listen.port)
        } catch {
            throw .bind(error.description)
        }
        sockets = publicSockets + [adminSocket]
        publicPort = publicSockets[0].port
        adminPort = adminSocket.port
        if snapshot.adminToken == nil {
            logger.warn("no admin token configured: the admin API refuses every call", [])
        }
        snapshot.warnIfTestCATrusted(logger)
        if let context = snapshot.serverTLS, let files = gateway.server.tls {
            context.logLoaded(logger, files: files, now: Int64(Date().timeIntervalSince1970))
        }
        let control = EventLoop()
        let aligned = time == nil ? AlignedTime() : nil
        shared = GatewayShared(configPath: configPath, snapshot: snapshot, logger: logger,
                               accessLog: accessLog ?? Logger(level: .info, format: .json, fileDescriptor: 1), control: control,
                               time: time ?? aligned!)
        let descriptorLimit = Self.openFilesLimit()
        let reserved = ServerConfig.reservedDescriptors(openNow: Self.openDescriptors(), workers: workerCount)
        let connectionLimit = gateway.server.connectionLimit(descriptorLimit: descriptorLimit, reserved: reserved)
        let connectionsPerWorker = ServerConfig.connectionsPerWorker(connectionLimit, workers: workerCount)
        if gateway.server.maxConnections > descriptorLimit {
            logger.warn("server.max_connections is above the open-files limit: accepting pauses at the descriptor limit first",
                        [("max_connections", .int(gateway.server.maxConnections)), ("open_files_limit", .int(descriptorLimit))])
        }
        var loops: [EventLoop] = []
        let ready = DispatchGroup()
        for index in 0..<workerCount {
            let loop = EventLoop()
            loops.append(loop)
            ready.enter()
            stopped.enter()
            let shared = self.shared
            let group = stopped
            let publicSocket = publicSockets[index]
            let thread = Thread {
                let worker = Worker(index: index, loop: loop, shared: shared, publicSocket: publicSocket, adminSocket: adminSocket,
                                    maxConnections: connectionsPerWorker)
                loop.register(worker)
                ready.leave()
                withExtendedLifetime(worker) {
                    loop.run()
                    worker.loopStopped()
                }
                CryptoThread.releaseState()
                group.leave()
            }
            thread.name = "attestgate-worker-\(index)"
            thread.start()
        }
        workerLoops = loops
        ready.wait()
        stopped.enter()
        let group = stopped
        let controlThread = Thread {
            control.run()
            CryptoThread.releaseState()
            group.leave()
        }
        controlThread.name = "attestgate-control"
        controlThread.start()
        let shared = self.shared
        control.execute {
            let watcher = TenantDirectoryWatcher(loop: control, directory: shared.snapshots.snapshot.gateway.tenantsDirectory,
                                                 initial: tenantFiles) {
                _ = shared.reload(trigger: "tenants_dir")
            }
            control.register(watcher)
            let tierSync = TierSync(loop: control, redisURL: gateway.redis.url, store: shared.tierStore, logger: logger,
                                    timeout: gateway.redis.backgroundTimeout)
            control.register(tierSync)
            if let aligned {
                control.register(RedisClockAlignment(loop: control, url: gateway.redis.url, time: aligned,
                                                     timeout: gateway.redis.backgroundTimeout, logger: logger))
            }
            control.register(StoreEpochWatch(loop: control, url: gateway.redis.url, timeout: gateway.redis.backgroundTimeout,
                                             epoch: shared.storeEpoch, time: shared.time, logger: shared.throttledLogger,
                                             metrics: shared.metrics))
            control.register(LogThrottleFlusher(loop: control, sink: shared.throttledLogger))
        }
        logger.info("attestgate serving", [
            ("listen", .string("\(gateway.server.listen.host):\(publicPort)")),
            ("tls", .bool(gateway.server.tls != nil)),
            ("admin", .string("\(gateway.admin.listen.host):\(adminPort)")),
            ("workers", .int(workerCount)), ("max_connections", .int(connectionsPerWorker * workerCount)),
            ("tenants", .int(config.tenants.all.count)),
        ])
    }

    /// Descriptors open now (`/proc/self/fd`, less the one that lists it).
    static func openDescriptors() -> Int {
        max(0, ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 0) - 1)
    }

    /// The soft `RLIMIT_NOFILE`: the descriptors the process may hold (`ulimit -n`).
    static func openFilesLimit() -> Int {
        var limit = rlimit()
        // RLIM_INFINITY is all ones: capped like any limit beyond 2^30.
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1 << 20 }
        return Int(min(limit.rlim_cur, 1 << 30))
    }

    /// The snapshot in force.
    public var snapshot: GatewaySnapshot { shared.snapshots.snapshot }

    public var metrics: MetricsRegistry { shared.metrics }

    /// Reloads configuration now (what SIGHUP and the admin API do).
    @discardableResult
    public func reload(trigger: String = "api") -> Result<Int, ConfigError> {
        shared.reload(trigger: trigger)
    }

    /// SIGHUP reloads, SIGTERM/SIGINT shut down gracefully. For the executable only.
    public func handleSignals() {
        let control = shared.control
        control.execute { [self] in
            let gateway = self
            control.onSignal(SIGHUP) { _ = gateway.reload(trigger: "SIGHUP") }
            control.onSignal(SIGTERM) { gateway.beginShutdown() }
            control.onSignal(SIGINT) { gateway.beginShutdown() }
        }
    }

    /// Stops accepting, finishes in-flight requests within `server.shutdown_grace`, stops.
    public func beginShutdown() {
        let alreadyStopping = stopping.withLock { state -> Bool in
            defer { state = true }
            return state
        }
        guard !alreadyStopping else { return }
        let grace = shared.snapshots.snapshot.gateway.server.shutdownGrace
        shared.logger.info("shutting down", [("graceMs", .int(Int(grace.milliseconds)))])
        // Each worker drops its listeners first thing; once every one has, the listening sockets
        // close, so that new connections are refused at once. Left open, a socket would go on
        // completing handshakes into its backlog, connections nobody accepts and that exit resets.
        let listening = Locked(workerLoops.count)
        for loop in workerLoops {
            loop.execute { [self] in
                loop.registered(Worker.self)?.shutdown(grace: grace)
                if listening.withLock({ count -> Bool in
                    count -= 1
                    return count == 0
                }) {
                    closeListeningSockets()
                }
            }
        }
        if workerLoops.isEmpty { closeListeningSockets() }
        let control = shared.control
        control.execute {
            control.registered(TierSync.self)?.close()
            control.registered(RedisClockAlignment.self)?.close()
            control.registered(StoreEpochWatch.self)?.close()
            control.registered(LogThrottleFlusher.self)?.close()
            control.stop()
        }
    }

    /// Blocks until every worker has stopped.
    public func waitUntilStopped() {
        stopped.wait()
        closeListeningSockets()
    }

    /// Closes the listening sockets exactly once: a second close could hit a descriptor number
    /// the process has since reused.
    private func closeListeningSockets() {
        let firstToClose = socketsClosed.withLock { closed -> Bool in
            defer { closed = true }
            return !closed
        }
        if firstToClose {
            for socket in sockets { socket.close() }
        }
    }

    /// `beginShutdown()` then `waitUntilStopped()`.
    public func shutdown() {
        beginShutdown()
        waitUntilStopped()
    }
}

extension Logger.Level {
    init(_ level: LogLevel) {
        switch level {
        case .debug: self = .debug
        case .info: self = .info
        case .warn: self = .warn
        case .error: self = .error
        }
    }
}
