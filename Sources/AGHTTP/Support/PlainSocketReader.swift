internal import CEvent
internal import CShims
#if canImport(Glibc)
import Glibc
#endif

/// The read side of a plain (non-TLS) connection: its own libevent event reads the socket into
/// the bufferevent's input, in place of the bufferevent's reading.
///
/// libevent 2.1's socket bufferevent asks the kernel how many bytes wait (`ioctl(FIONREAD)`)
/// before every read, and reads at most 4 KiB: one system call more per read, two per proxied
/// request. This reader reads up to `maxRead` bytes without asking, and keeps the bufferevent's
/// read behaviour that the connections rely on:
/// - the read timeout runs while reading is on and restarts with every read and every
///   `setTimeout`; when it expires, reading goes off and the owner hears READING|TIMEOUT;
/// - end of stream and a read error turn reading off and report READING|EOF and
///   READING|ERROR (with `errno` as the read left it). (Reading is turned on only once a
///   connection is established, so a refused connect is always the write side's to report.)
/// - the input holds at most `limit` bytes: a read takes at most the room left,
///   and at the limit reading is suspended (the event off, so no timeout either) until the
///   input drains below it, noticed by an input-buffer callback attached only meanwhile.
/// The bufferevent keeps the write side. Loop thread only; `close()` before the bufferevent is
/// freed (it closes the socket).
///
/// The timeout is kept lazily, as nginx keeps its timers: the read event carries none, and a
/// timer of its own is armed only when the deadline moves *earlier* than the time it is set to
/// fire. A read or a new timeout only notes the time (a coarse monotonic clock, read from the
/// vDSO); when the timer fires before the deadline it re-arms itself for the rest. libevent
/// re-adds a persistent event with a timeout after every callback, and every timeout change was
/// an `event_add`: six heap updates per proxied request (two connections), ~1,500 instructions,
/// now none on a busy connection (its timer fires about once per timeout period).
final class PlainSocketReader {
    /// The most one read takes (libevent's own reads take at most 4 KiB).
    static let maxRead = 16 * 1024
    /// The most a small read takes (`ag_read_socket_small`). A connection reads small — heads,
    /// small bodies — until a read fills that, then straight into the input up to `maxRead`
    /// until a read comes back under it: bulk bodies are not copied twice.
    static let smallRead = 4 * 1024

    private let fd: Int32
    private let input: OpaquePointer
    private let limit: Int
    private var event: OpaquePointer?
    /// The timeout's own timer (a one-shot event), created with the first timeout.
    private var timer: OpaquePointer?
    /// The read timeout in microseconds; nil for none.
    private var timeout: Int64?
    /// When the timeout last restarted (a read, `setTimeout`, reading turned on), on
    /// `Self.now()`'s clock.
    private var lastProgress: Int64 = 0
    /// When the timer is set to fire (nil: not armed).
    private var timerFiresAt: Int64?
    /// Reading is on, as the owner last said.
    private(set) var isEnabled = false
    /// The input is at the limit: the event is off until it drains.
    private var suspended = false
    /// The last read filled `smallRead`: read straight into the input.
    private var bulk = false
    /// The input-buffer callback that ends a suspension (evbuffer_cb_entry).
    private var drainWatch: OpaquePointer?
    private let onReadable: () -> Void
    private let onEvent: (Int16) -> Void
    /// Offered a small read's bytes before they reach an empty input: true when the owner took
    /// them (and put whatever it left into the input itself); false, they go to the input and
    /// `onReadable` runs as usual. Connections take a whole head here (a request's, a
    /// response's and the body behind it) without passing it through the input's buffer chain.
    var offer: ((UnsafeRawBufferPointer) -> Bool)?

    /// `onReadable` runs after each read that added bytes; `onEvent` gets BEV_EVENT_* flags.
    init(base: OpaquePointer, fd: Int32, input: OpaquePointer, limit: Int,
         onReadable: @escaping () -> Void, onEvent: @escaping (Int16) -> Void) {
        self.fd = fd
        self.input = input
        self.limit = limit
        self.onReadable = onReadable
        self.onEvent = onEvent
        // A bufferevent keeps its input's end frozen except while it reads itself; this reader
        // is the only writer of that end now.
        evbuffer_unfreeze(input, 0)
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { _, what, context in
            let reader = Unmanaged<PlainSocketReader>.fromOpaque(context!).takeUnretainedValue()
            withExtendedLifetime(reader) { reader.fired(what) }
        }, context)
    }

    deinit {
        close()
    }

    /// Frees the event (and the drain callback); reading is over for good. Safe inside the
    /// reader's own callbacks and more than once.
    func close() {
        stopWatchingDrain()
        if let event { event_free(event) }
        event = nil
        if let timer { event_free(timer) }
        timer = nil
        timerFiresAt = nil
        isEnabled = false
    }

    /// Turns reading on (starting the read timeout) or off; the same state again changes
    /// nothing.
    func setEnabled(_ enabled: Bool) {
        guard enabled != isEnabled else { return }
        isEnabled = enabled
        schedule()
    }

    /// The read timeout; nil for none. Restarts it when reading is on.
    func setTimeout(_ timeout: timeval?) {
        self.timeout = timeout.map { Int64($0.tv_sec) &* 1_000_000 &+ Int64($0.tv_usec) }
        restartTimeout()
    }

    /// Adds the event when reading is on and not suspended (restarting the timeout), else
    /// removes it. A timer left armed meanwhile finds reading off when it fires and stops.
    private func schedule() {
        guard let event else { return }
        if isEnabled, !suspended {
            event_add(event, nil)
            restartTimeout()
        } else {
            event_del(event)
        }
    }

    /// The timeout runs from now: the timer is re-armed only if it would fire too late.
    private func restartTimeout() {
        guard let timeout, isEnabled, !suspended, event != nil else { return }
        lastProgress = Self.now()
        let deadline = lastProgress &+ timeout
        if let firesAt = timerFiresAt, firesAt <= deadline { return }
        armTimer(in: timeout)
    }

    private func armTimer(in microseconds: Int64) {
        if timer == nil {
            let context = Unmanaged.passUnretained(self).toOpaque()
            timer = ag_evtimer_new(event_get_base(event), { _, _, context in
                let reader = Unmanaged<PlainSocketReader>.fromOpaque(context!).takeUnretainedValue()
                withExtendedLifetime(reader) { reader.timerFired() }
            }, context)
        }
        guard let timer else { return }
        var tv = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
        ag_evtimer_add(timer, &tv)
        timerFiresAt = Self.now() &+ microseconds
    }

    private func timerFired() {
        timerFiresAt = nil
        guard let timeout, isEnabled, !suspended, event != nil else { return }
        let left = lastProgress &+ timeout &- Self.now()
        if left > 0 {
            armTimer(in: left)
            return
        }
        setEnabled(false)
        onEvent(Int16(BEV_EVENT_READING | BEV_EVENT_TIMEOUT))
    }

    /// Microseconds on the coarse monotonic clock: the time of the kernel's last tick (1–4 ms
    /// grain), read from the vDSO in ~4 ns (the precise clock takes ~25). Times are noted up to
    /// a tick early and the timer runs on libevent's precise clock, so a timeout fires within a
    /// tick of its deadline, either side.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) &* 1_000_000 &+ Int64(time.tv_nsec / 1000)
    }

    private func fired(_ what: Int16) {
        let room = limit - evbuffer_get_length(input)
        guard room > 0 else {
            suspend()
            return
        }
        let got: Int
        if !bulk, let offer, evbuffer_get_length(input) == 0 {
            got = offered(to: offer, room: room)
        } else {
            got = bulk ? ag_read_socket(input, fd, UInt(min(room, Self.maxRead)))
                       : ag_read_socket_small(input, fd, UInt(min(room, Self.smallRead)))
            if got > 0 {
                noteRead(got)
                onReadable()
            }
        }
        if got > 0 {
            if event != nil, !suspended, evbuffer_get_length(input) >= limit { suspend() }
            return
        }
        if got < 0 {
            let error = errno
            if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return }
            setEnabled(false)
            errno = error
            onEvent(Int16(BEV_EVENT_READING | BEV_EVENT_ERROR))
            return
        }
        setEnabled(false)
        onEvent(Int16(BEV_EVENT_READING | BEV_EVENT_EOF))
    }

    /// A small read into the thread's scratch buffer (4 KiB, one per loop thread: a temporary
    /// allocation that large is a malloc), offered to the owner before the input: what `read`
    /// returned (errno as it left it). The owner copies what it keeps before it runs anything
    /// that could read again.
    private func offered(to offer: (UnsafeRawBufferPointer) -> Bool, room: Int) -> Int {
        var scratch: UnsafePointer<UInt8>?
        let got = ag_read_socket_scratch(fd, UInt(min(room, Self.smallRead)), &scratch)
        guard got > 0 else { return got }
        noteRead(got)
        let bytes = UnsafeRawBufferPointer(start: scratch, count: got)
        if !offer(bytes) {
            guard evbuffer_add(input, scratch, got) == 0 else {
                errno = ENOMEM
                return -1
            }
            onReadable()
        }
        return got
    }

    /// After a read of `got` bytes: the next read's size, and the timeout restarted.
    private func noteRead(_ got: Int) {
        bulk = got >= Self.smallRead
        if timeout != nil { lastProgress = Self.now() }
    }

    /// The input reached the limit: reading stops until it drains below.
    private func suspend() {
        guard !suspended, let event else { return }
        suspended = true
        event_del(event)
        let context = Unmanaged.passUnretained(self).toOpaque()
        drainWatch = evbuffer_add_cb(input, { buffer, _, context in
            let reader = Unmanaged<PlainSocketReader>.fromOpaque(context!).takeUnretainedValue()
            reader.inputChanged()
        }, context)
    }

    private func inputChanged() {
        guard suspended, evbuffer_get_length(input) < limit else { return }
        stopWatchingDrain()
        suspended = false
        schedule()
    }

    private func stopWatchingDrain() {
        if let drainWatch { evbuffer_remove_cb_entry(input, drainWatch) }
        drainWatch = nil
    }
}
