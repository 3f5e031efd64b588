#if canImport(Glibc)
import Glibc
#endif
internal import CEvent
internal import AGEventLoop

/// One TCP connection to an upstream: connecting, serving one exchange, or idle in the pool.
///
/// Loop thread only. While serving, the exchange keeps it alive; while idle, the pool does.
/// The pool is referenced weakly: idle connections die with it.
final class UpstreamConnection {
    private weak var pool: UpstreamPool?
    let address: UpstreamAddress
    private var bev: OpaquePointer?
    let input: OpaquePointer
    let output: OpaquePointer
    /// The exchange being served; nil while idle in the pool.
    var exchange: UpstreamExchange?
    /// True once the connection has completed a response (it came from the pool).
    var reused = false
    /// The TCP connect completed; until then libevent's own EV_WRITE watches for it.
    private var connected = false
    var isOpen: Bool { bev != nil }

    /// Opens a non-blocking socket and starts connecting; the outcome arrives as an event.
    init(pool: UpstreamPool, address: UpstreamAddress, connectTimeout: Duration) throws(UpstreamError) {
        self.pool = pool
        self.address = address
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connectFailed(String(cString: strerror(errno))) }
        // Heads and small bodies go out as written; Nagle would hold them for an ACK.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        guard let bev = bufferevent_socket_new(pool.loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            Glibc.close(fd)
            throw .connectFailed("bufferevent_socket_new failed")
        }
        self.bev = bev
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
        bufferevent_setwatermark(bev, Int16(EV_READ), 0, pool.configuration.highWatermark)
        // The write timeout covers the connect: libevent waits for writability meanwhile.
        setTimeouts(read: nil, write: connectTimeout)
        let started = address.withSockaddr { bufferevent_socket_connect(bev, UnsafeMutablePointer(mutating: $0), Int32($1)) }
        if started != 0 {
            let why = String(cString: strerror(errno))
            bufferevent_free(bev)
            self.bev = nil
            throw .connectFailed(why)
        }
        pool.connectionOpened()
    }

    deinit {
        if let bev { bufferevent_free(bev) }
    }

    /// Sets the read and write timeouts; nil disables one.
    func setTimeouts(read: Duration?, write: Duration?) {
        guard let bev else { return }
        var readTV = read.map { timeval($0) } ?? timeval()
        var writeTV = write.map { timeval($0) } ?? timeval()
        withUnsafePointer(to: &readTV) { readPointer in
            withUnsafePointer(to: &writeTV) { writePointer in
                _ = bufferevent_set_timeouts(bev, read == nil ? nil : readPointer, write == nil ? nil : writePointer)
            }
        }
    }

    func setReading(_ enabled: Bool) {
        guard let bev else { return }
        if enabled {
            bufferevent_enable(bev, Int16(EV_READ))
        } else {
            bufferevent_disable(bev, Int16(EV_READ))
        }
    }

    /// Writes queued output straight to the socket; arms EV_WRITE only for what the socket did
    /// not take (libevent writes the rest and calls `writable` once drained). This spares two
    /// epoll_ctl calls per request. Write errors surface through the armed event.
    func flushOutput() {
        guard let bev, connected, evbuffer_get_length(output) > 0 else { return }
        if bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0 {
            writeQueuedOutput(output, to: bufferevent_getfd(bev))
        }
        if evbuffer_get_length(output) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        }
    }

    /// Puts the connection to sleep in the pool: reads stay on so that a close by the upstream
    /// (or stray bytes) is noticed at once, and the read timeout expires it.
    func becomeIdle(timeout: Duration) {
        exchange = nil
        reused = true
        setTimeouts(read: timeout, write: nil)
        setReading(true)
    }

    /// Closes the socket. Safe to call more than once and from inside its own callbacks
    /// (libevent defers the free until the callback returns).
    func close() {
        guard let bev else { return }
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
        if let bev, connected { bufferevent_disable(bev, Int16(EV_WRITE)) }
        exchange?.upstreamWritable(self)
    }

    private func event(_ events: Int16) {
        if events & Int16(BEV_EVENT_CONNECTED) != 0 { connected = true }
        if let exchange {
            let error = events & Int16(BEV_EVENT_ERROR) != 0 ? errno : 0
            exchange.upstreamEvent(self, events: events, error: error)
        } else {
            discard()
        }
    }

    private func discard() {
        if let pool {
            pool.discardIdle(self)
        } else {
            close()
        }
    }
}
