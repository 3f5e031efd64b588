#if canImport(Glibc)
import Glibc
#endif
internal import CEvent
internal import AGEventLoop
internal import AGCrypto

/// One TCP or TLS connection to an upstream: connecting, serving one exchange, or idle in the
/// pool.
///
/// Loop thread only. While serving, the exchange keeps it alive; while idle, the pool does.
/// The pool is referenced weakly: idle connections die with it. A TLS connection reports
/// BEV_EVENT_CONNECTED once its handshake (certificate and name verified) is done, and leaves
/// writing to libevent, which cannot be bypassed under TLS.
final class UpstreamConnection {
    private weak var pool: UpstreamPool?
    let endpoint: UpstreamEndpoint
    private var bev: OpaquePointer?
    /// The bufferevent's socket (fetched once: `bufferevent_getfd` takes its lock).
    private let descriptor: Int32
    /// The connection speaks TLS.
    let isSecure: Bool
    let input: OpaquePointer
    let output: OpaquePointer
    /// The exchange being served; nil while idle in the pool.
    var exchange: UpstreamExchange?
    /// True once the connection has completed a response (it came from the pool).
    var reused = false
    /// The TCP connect completed; until then libevent's own EV_WRITE watches for it.
    private var connected = false
    /// The response and idle timeouts, converted once per connection rather than per request.
    private var timevals = TimevalMemo()
    /// Plain sockets: reads in place of the bufferevent (no FIONREAD query per read) and bounds
    /// the input at `highWatermark`; nil under TLS and once closed.
    private var reader: PlainSocketReader?
    /// The write timeout last given to the bufferevent (plain sockets set it only on change).
    private var writeTimeout: Duration??
    var isOpen: Bool { bev != nil }

    /// Opens a non-blocking socket and starts connecting (and, with `tls`, the handshake for
    /// the endpoint's server name); the outcome arrives as an event.
    init(pool: UpstreamPool, endpoint: UpstreamEndpoint, tls: TLSClientContext?, connectTimeout: Duration) throws(UpstreamError) {
        self.pool = pool
        self.endpoint = endpoint
        isSecure = tls != nil
        let family = endpoint.address.family == .v6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connectFailed(String(cString: strerror(errno))) }
        // Heads and small bodies go out as written; Nagle would hold them for an ACK.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        let made: OpaquePointer?
        if let tls, let peer = endpoint.tls {
            // Connect first, then let the TLS bufferevent wait for writability and handshake.
            let started = endpoint.address.withSocketAddress(port: endpoint.port) { Glibc.connect(fd, $0, $1) }
            guard started == 0 || errno == EINPROGRESS else {
                let why = String(cString: strerror(errno))
                Glibc.close(fd)
                throw .connectFailed(why)
            }
            guard let ssl = tls.makeConnection(host: peer.serverName) else {
                Glibc.close(fd)
                throw .tlsFailed("cannot set up TLS for \(peer.serverName)")
            }
            // The bufferevent owns the SSL from here, failure included.
            made = bufferevent_openssl_socket_new(pool.loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING, options)
            if let made { bufferevent_openssl_set_allow_dirty_shutdown(made, 1) }
        } else {
            made = bufferevent_socket_new(pool.loop.base, fd, options)
        }
        guard let bev = made else {
            Glibc.close(fd)
            throw .connectFailed("cannot create the upstream connection")
        }
        self.bev = bev
        descriptor = fd
        input = bufferevent_get_input(bev)
        output = bufferevent_get_output(bev)
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, context in
            let connection = Unmanaged<UpstreamConnection>.fromOpaque(context!).takeUnretainedValue()
            withExtendedLifetime(connection) { connection.readable() }
        }, { _, context in
            let connection = Unmanaged<UpstreamConnection>.fromOpaque(context!).takeUnretainedValue()
            withExtendedLifetime(connection) { connection.writable() }
        }, { _, events, context in
            let connection = Unmanaged<UpstreamConnection>.fromOpaque(context!).takeUnretainedValue()
            withExtendedLifetime(connection) { connection.event(events) }
        }, context)
        if isSecure {
            // TLS: libevent's read watermark bounds the response input, from the start (a TLS
            // bufferevent may decrypt several records before it calls back).
            bufferevent_setwatermark(bev, Int16(EV_READ), 0, pool.configuration.highWatermark)
        } else {
            reader = PlainSocketReader(base: pool.loop.base, fd: descriptor, input: input,
                                       limit: pool.configuration.highWatermark,
                                       onReadable: { [unowned self] in withExtendedLifetime(self) { self.readable() } },
                                       onEvent: { [unowned self] events in withExtendedLifetime(self) { self.event(events) } })
            reader?.offer = { [unowned self] bytes in
                withExtendedLifetime(self) { exchange?.takeHead(self, bytes) ?? false }
            }
        }
        pool.connectionOpened()
        if isSecure {
            // Each step of connect and handshake waits for one direction: both are bounded.
            setTimeouts(read: connectTimeout, write: connectTimeout)
            return
        }
        // The write timeout covers the connect: libevent waits for writability meanwhile.
        setTimeouts(read: nil, write: connectTimeout)
        let started = endpoint.address.withSocketAddress(port: endpoint.port) {
            bufferevent_socket_connect(bev, UnsafeMutablePointer(mutating: $0), Int32($1))
        }
        if started != 0 {
            let why = String(cString: strerror(errno))
            close()
            throw .connectFailed(why)
        }
    }

    deinit {
        reader?.close()
        if let bev { bufferevent_free(bev) }
    }

    /// Sets the read and write timeouts; nil disables one.
    func setTimeouts(read: Duration?, write: Duration?) {
        guard let bev else { return }
        if let reader {
            reader.setTimeout(read.map { timevals.convert($0) })
            guard writeTimeout != .some(write) else { return }
            writeTimeout = .some(write)
            var writeTV = write.map { timevals.convert($0) } ?? timeval()
            withUnsafePointer(to: &writeTV) { _ = bufferevent_set_timeouts(bev, nil, write == nil ? nil : $0) }
            return
        }
        var readTV = read.map { timevals.convert($0) } ?? timeval()
        var writeTV = write.map { timevals.convert($0) } ?? timeval()
        withUnsafePointer(to: &readTV) { readPointer in
            withUnsafePointer(to: &writeTV) { writePointer in
                _ = bufferevent_set_timeouts(bev, read == nil ? nil : readPointer, write == nil ? nil : writePointer)
            }
        }
    }

    /// Turns reading on or off. libevent 2.1 re-adds the read event (its timeout included) on
    /// every `bufferevent_enable`, even when reading is already on; that is skipped here, as
    /// it happened twice per proxied request (when the request is sent and when the connection
    /// goes idle).
    func setReading(_ enabled: Bool) {
        if let reader {
            reader.setEnabled(enabled)
            return
        }
        guard let bev else { return }
        if enabled {
            guard bufferevent_get_enabled(bev) & Int16(EV_READ) == 0 else { return }
            bufferevent_enable(bev, Int16(EV_READ))
        } else {
            bufferevent_disable(bev, Int16(EV_READ))
        }
    }

    /// Writes queued output straight to the socket; arms EV_WRITE only for what the socket did
    /// not take (libevent writes the rest and calls `writable` once drained). This spares two
    /// epoll_ctl calls per request. Write errors surface through the armed event. Under TLS,
    /// EV_WRITE stays enabled and libevent arms the write event when output arrives.
    func flushOutput() {
        guard let bev, connected, !isSecure, evbuffer_get_length(output) > 0 else { return }
        if bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0 {
            writeQueuedOutput(output, to: descriptor)
        }
        if evbuffer_get_length(output) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        }
    }

    /// Writes `bytes` behind whatever is queued: on a connected plain socket with nothing
    /// queued, straight from the caller's buffer (`sendOrQueue`); otherwise queued and flushed.
    func write(_ bytes: UnsafeRawBufferPointer) {
        guard let bev, connected, !isSecure, canSendNow(bev, output) else {
            evbuffer_add(output, bytes.baseAddress, bytes.count)
            flushOutput()
            return
        }
        sendOrQueue(bytes, on: bev, fd: descriptor, queueingIn: output)
    }

    /// Puts the connection to sleep in the pool: reads stay on so that a close by the upstream
    /// (or stray bytes) is noticed at once, and the read timeout expires it.
    func becomeIdle(timeout: Duration) {
        exchange = nil
        reused = true
        if let reader {
            // Nothing is written while idle (EV_WRITE is off), so the write timeout stays as
            // the exchange left it: the next exchange sets the same one.
            reader.setTimeout(timevals.convert(timeout))
        } else {
            setTimeouts(read: timeout, write: nil)
        }
        setReading(true)
    }

    /// Closes the socket. Safe to call more than once and from inside its own callbacks
    /// (libevent defers the free until the callback returns).
    func close() {
        guard let bev else { return }
        // The reader's event goes before the bufferevent closes the socket.
        reader?.close()
        reader = nil
        bufferevent_free(bev)
        self.bev = nil
        exchange = nil
        pool?.connectionClosed()
    }

    private func readable() {
        if let exchange {
            exchange.upstreamReadable(self)
        } else {
            // An idle connection must stay silent; anything read means it is unusable.
            discard()
        }
    }

    private func writable() {
        if let bev, connected, !isSecure { bufferevent_disable(bev, Int16(EV_WRITE)) }
        exchange?.upstreamWritable(self)
    }

    private func event(_ events: Int16) {
        let error = events & Int16(BEV_EVENT_ERROR) != 0 ? errno : 0
        if events & Int16(BEV_EVENT_CONNECTED) != 0 { connected = true }
        if let exchange {
            exchange.upstreamEvent(self, events: events, error: error)
        } else {
            discard()
        }
    }

    /// Why a TLS connection failed before it was established: the TLS failure (certificate,
    /// name, protocol), or nil when TLS gave no verdict because the socket failed (connect
    /// refused or reset, closed mid-handshake): a connection failure, after which another
    /// address may be tried. libevent records `SSL_ERROR_SYSCALL` itself (code 5, no library)
    /// for a refused connect, which classifies as `closed` too.
    func handshakeFailure() -> TLSHandshakeFailure? {
        guard isSecure, !connected, let bev else { return nil }
        var errors: [UInt] = []
        while case let code = bufferevent_get_openssl_error(bev), code != 0 { errors.append(code) }
        let ssl = bufferevent_openssl_get_ssl(bev)
        let failure = TLSHandshakeFailure(errors: errors.reversed(), connection: ssl)
        return failure.reason == .closed ? nil : failure
    }

    /// Whether a TLS handshake had begun on the wire (the ClientHello was sent), so the TCP
    /// connection was up: a close before the handshake ended is no refused connect.
    var handshakeBegan: Bool {
        guard isSecure, let bev, let ssl = bufferevent_openssl_get_ssl(bev) else { return false }
        return TLSConnectionInfo.sentAnything(ssl)
    }

    private func discard() {
        if let pool {
            pool.discardIdle(self)
        } else {
            close()
        }
    }
}

/// The last two `Duration` → `timeval` conversions of one owner: a connection sets the same
/// few timeouts again and again, and each conversion divides a 128-bit integer.
struct TimevalMemo {
    private var recent: (duration: Duration, value: timeval)?
    private var older: (duration: Duration, value: timeval)?

    mutating func convert(_ duration: Duration) -> timeval {
        if let recent, recent.duration == duration { return recent.value }
        if let older, older.duration == duration { return older.value }
        let value = duration.timeval
        older = recent
        recent = (duration, value)
        return value
    }
}
