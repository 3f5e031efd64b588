#if canImport(Glibc)
import Glibc
#endif
internal import CEvent
public import AGEventLoop
public import AGCrypto

/// Timeouts and limits of one server.
public struct HTTPServerConfiguration: Sendable {
    /// How long a request head or body may take to arrive between reads.
    public var readTimeout: Duration = .seconds(30)
    /// Deadline for a whole request head from its first byte; unlike `readTimeout`, a client
    /// sending a byte at a time cannot push it back.
    public var headerTimeout: Duration = .seconds(10)
    /// Least average body rate, in bytes per second over each `bodyRateWindow`, while a
    /// handler is reading the body; slower clients are disconnected. 0 disables the check.
    public var bodyMinRate = 0
    public var bodyRateWindow: Duration = .seconds(5)
    /// How long a response write may stall.
    public var writeTimeout: Duration = .seconds(30)
    /// How long a keep-alive connection may sit idle between requests.
    public var idleTimeout: Duration = .seconds(60)
    /// Lingering close (RFC 9112 section 9.6), after an answer given while the client may
    /// still be sending (a body not read, a refused head): the write side is shut and what
    /// arrives is read and dropped for at most `lingeringTimeout` between reads,
    /// `lingeringTime` in all and `lingeringMaxBytes`, then the connection closes. nginx's
    /// `lingering_timeout` and `lingering_time` defaults; not configuration keys.
    public var lingeringTimeout: Duration = .seconds(5)
    public var lingeringTime: Duration = .seconds(30)
    public var lingeringMaxBytes = 64 << 20
    public var maxHeadBytes = 16 * 1024
    /// Input buffered per connection before reading pauses (backpressure). With
    /// `maxPendingOutput`, what a client that pipelines and never reads pins (an independent
    /// sweep measured 330–520 KiB per connection at 256 KiB each; nginx holds tens of KiB).
    public var readHighWatermark = 64 * 1024
    /// Unsent output per connection above which no further pipelined request is read.
    public var maxPendingOutput = 64 * 1024
    /// How long accepting pauses when the process is out of file descriptors.
    public var acceptBackoff: Duration = .milliseconds(100)
    /// Connections this server holds open at most (0: no cap but the descriptor limit). At the
    /// cap accepting pauses, so further connections wait in the kernel's accept queue (HAProxy's
    /// `maxconn`), until one closes.
    public var maxConnections = 0
    /// Accept through the process's reserved descriptor when out of descriptors (for the
    /// admin listener, so it keeps answering).
    public var usesReservedDescriptor = false

    public init() {}
}

/// What a server reports to its owner and asks of it.
public struct HTTPServerDelegate {
    /// Answers a request the server refused or timed out itself (`request.localError`):
    /// the owner renders its own envelope, request id and access-log line. When nil, the
    /// server writes a minimal envelope.
    public var localReply: ((HTTPServerRequest, HTTPLocalError) -> Void)?
    /// Accepting paused for lack of descriptors: `errno` and how many accepts failed since the
    /// last report. Called at most once per `reportInterval`.
    public var acceptFailed: ((_ errno: Int32, _ failures: Int) -> Void)?
    /// Accepting paused at `maxConnections`: how many times it paused since the last report.
    /// Called at most once per `reportInterval`.
    public var connectionLimitReached: ((_ pauses: Int) -> Void)?
    public var reportInterval: Duration = .seconds(10)
    /// A TLS handshake failed (a connection closed before sending any byte is not reported).
    public var tlsHandshakeFailed: ((TLSHandshakeFailure) -> Void)?
    /// A TLS handshake completed, with the negotiated version (`TLSv1.3`).
    public var tlsHandshakeCompleted: ((String) -> Void)?

    public init(localReply: ((HTTPServerRequest, HTTPLocalError) -> Void)? = nil,
                acceptFailed: ((Int32, Int) -> Void)? = nil,
                tlsHandshakeFailed: ((TLSHandshakeFailure) -> Void)? = nil,
                tlsHandshakeCompleted: ((String) -> Void)? = nil) {
        self.localReply = localReply
        self.acceptFailed = acceptFailed
        self.tlsHandshakeFailed = tlsHandshakeFailed
        self.tlsHandshakeCompleted = tlsHandshakeCompleted
    }
}

/// An HTTP/1.1 server on one event loop, accepting from a shared listening socket, in plain
/// TCP or in TLS (OpenSSL bufferevents).
///
/// Built directly on bufferevents rather than evhttp, because a proxy must stream request
/// bodies (evhttp buffers them whole) and see header fields exactly as sent.
public final class HTTPServer {
    let loop: EventLoop
    let configuration: HTTPServerConfiguration
    /// `configuration`'s read, write, idle and lingering timeouts as libevent takes them,
    /// converted once: a connection sets them for every request.
    let timevals: (read: timeval, write: timeval, idle: timeval, lingering: timeval)
    let handler: (HTTPServerRequest) -> Void
    let delegate: HTTPServerDelegate
    /// Set for a TLS listener: every accepted connection handshakes first.
    let tls: HTTPServerTLS?
    private var listener: OpaquePointer?
    private var connections: [ObjectIdentifier: HTTPServerConnection] = [:]
    private var shutdownCompletion: (() -> Void)?
    private var graceTimer: EventTimer?
    private var resumeTimer: EventTimer?
    /// The `Date` value of this server's answers, formatted once per second.
    var dateField = DateFieldCache()
    private var acceptFailureReports = ReportThrottle()
    /// Accepting is paused for lack of descriptors until `resumeTimer` fires.
    private var backingOff = false
    /// Accepting is paused at `configuration.maxConnections`.
    private var atConnectionLimit = false
    private var limitReports = ReportThrottle()

    /// Connections currently open.
    public var connectionCount: Int { connections.count }
    /// How many connections have part of a head and wait for the rest (for tests).
    var connectionsReadingHead: Int { connections.values.count { $0.machine.state == .readingHead } }
    /// Accepts that failed for lack of descriptors, since the server started.
    public private(set) var acceptFailures = 0
    /// Times accepting paused at `maxConnections`, since the server started.
    public private(set) var connectionLimitPauses = 0

    public init(loop: EventLoop, socket: ListeningSocket, configuration: HTTPServerConfiguration,
                delegate: HTTPServerDelegate = HTTPServerDelegate(), tls: HTTPServerTLS? = nil,
                handler: @escaping (HTTPServerRequest) -> Void) {
        self.loop = loop
        self.configuration = configuration
        timevals = (configuration.readTimeout.timeval, configuration.writeTimeout.timeval, configuration.idleTimeout.timeval,
                    configuration.lingeringTimeout.timeval)
        self.handler = handler
        self.delegate = delegate
        self.tls = tls
        let context = Unmanaged.passUnretained(self).toOpaque()
        // Accepted sockets are close-on-exec (accept4): a child process never inherits a client.
        listener = evconnlistener_new(loop.base, { _, fd, address, _, context in
            Unmanaged<HTTPServer>.fromOpaque(context!).takeUnretainedValue().accept(fd: fd, address: address, reserved: false)
        }, context, UInt32(LEV_OPT_CLOSE_ON_EXEC), -1, socket.fileDescriptor)
        precondition(listener != nil, "evconnlistener_new failed")
        // With an error callback libevent neither logs nor retries: `acceptFailed` decides.
        evconnlistener_set_error_cb(listener) { _, context in
            Unmanaged<HTTPServer>.fromOpaque(context!).takeUnretainedValue().acceptFailed(errno)
        }
        if configuration.usesReservedDescriptor { ReservedDescriptor.acquire() }
    }

    deinit {
        if let listener { evconnlistener_free(listener) }
    }

    private func accept(fd: Int32, address: UnsafeMutablePointer<sockaddr>?, reserved: Bool) {
        guard shutdownCompletion == nil else {
            evutil_closesocket(fd)
            if reserved { ReservedDescriptor.acquire() }
            return
        }
        guard let connection = HTTPServerConnection(server: self, fd: fd, remoteAddress: ipString(address), reserved: reserved,
                                                    tls: tls?.context()) else {
            if reserved { ReservedDescriptor.acquire() }
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        if configuration.maxConnections > 0, connections.count >= configuration.maxConnections, !atConnectionLimit {
            atConnectionLimit = true
            connectionLimitPauses += 1
            if let pauses = limitReports.count(every: delegate.reportInterval) { delegate.connectionLimitReached?(pauses) }
            updateAccepting()
        }
        connection.start()
    }

    /// The listener accepts unless out of descriptors (until the backoff ends) or at the
    /// connection cap (until a connection closes). libevent stops its accept loop as soon as
    /// a callback disables the listener, so the cap is never passed.
    private func updateAccepting() {
        guard let listener else { return }
        if backingOff || atConnectionLimit {
            evconnlistener_disable(listener)
        } else {
            evconnlistener_enable(listener)
        }
    }

    /// Out of descriptors (or kernel memory) the listening socket stays readable, so accepting
    /// again at once would spin: pause for `acceptBackoff`, report at most once per interval.
    /// A server with the reserve first spends it on the waiting connection.
    private func acceptFailed(_ code: Int32) {
        guard code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM, let listener else { return }
        acceptFailures += 1
        if configuration.usesReservedDescriptor, ReservedDescriptor.release() {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.accept(evconnlistener_get_fd(listener), $0, &length)
                }
            }
            if fd >= 0 {
                evutil_make_socket_nonblocking(fd)
                evutil_make_socket_closeonexec(fd)
                withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd: fd, address: $0, reserved: true) }
                }
            } else {
                ReservedDescriptor.acquire()
            }
        }
        if let failures = acceptFailureReports.count(every: delegate.reportInterval) { delegate.acceptFailed?(code, failures) }
        backingOff = true
        updateAccepting()
        if resumeTimer == nil {
            resumeTimer = EventTimer(loop: loop) { [weak self] in
                guard let self else { return }
                backingOff = false
                updateAccepting()
            }
        }
        resumeTimer?.arm(after: configuration.acceptBackoff)
    }

    func connectionClosed(_ connection: HTTPServerConnection) {
        connections[ObjectIdentifier(connection)] = nil
        if connection.reserved { ReservedDescriptor.acquire() }
        if atConnectionLimit, connections.count < configuration.maxConnections {
            atConnectionLimit = false
            updateAccepting()
        }
        if connections.isEmpty, let completion = shutdownCompletion {
            finishShutdown(completion)
        }
    }

    /// Answers a request the server made up itself, through the owner when it has a renderer.
    func localReply(_ request: HTTPServerRequest, _ error: HTTPLocalError) {
        if let render = delegate.localReply {
            render(request, error)
        } else {
            error.respondByDefault(request)
        }
    }

    /// Stops accepting, lets in-flight requests finish for up to `grace`, then closes everything
    /// and calls `completion` (on the loop thread).
    public func shutdown(grace: Duration, completion: @escaping () -> Void) {
        if let listener {
            evconnlistener_free(listener)
            self.listener = nil
        }
        resumeTimer?.cancel()
        shutdownCompletion = completion
        for connection in Array(connections.values) {
            connection.shutdown()
        }
        if connections.isEmpty {
            finishShutdown(completion)
            return
        }
        let timer = EventTimer(loop: loop) { [weak self] in
            guard let self else { return }
            for connection in Array(self.connections.values) { connection.close() }
        }
        timer.arm(after: grace)
        graceTimer = timer
    }

    private func finishShutdown(_ completion: () -> Void) {
        shutdownCompletion = nil
        graceTimer?.cancel()
        graceTimer = nil
        completion()
    }

    var isShuttingDown: Bool { shutdownCompletion != nil }

    /// Appends `Date: <now>` to an answer's head.
    func appendDate(to writer: inout HTTPHeadWriter) {
        dateField.appendField(at: DateFieldCache.currentSecond(), to: &writer)
    }
}

/// Counts repeated events and lets a report through at most once per interval, with the count
/// since the previous report (accept failures, pauses at the connection cap).
struct ReportThrottle {
    private var unreported = 0
    private var last: ContinuousClock.Instant?

    /// Counts one event; the number to report when a report is due, else nil.
    mutating func count(every interval: Duration) -> Int? {
        unreported += 1
        let now = ContinuousClock.now
        if let last, now - last < interval { return nil }
        last = now
        defer { unreported = 0 }
        return unreported
    }
}
