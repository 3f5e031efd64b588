internal import CEvent
internal import CShims
import Synchronization

/// One libevent `event_base`, driven by exactly one thread.
///
/// Everything that touches the base (servers, connections, Redis, timers) is created and used on
/// the loop's own thread; other threads may only hand it work through `execute(_:)`.
public final class EventLoop: @unchecked Sendable {
    // Invariant: `base` is used only on the loop thread, except `event_active` on `wakeEvent`
    // (made thread-safe by `evthread_use_pthreads` before the base was created) and the
    // mutex-guarded queue.
    let base: OpaquePointer
    private var wakeEvent: OpaquePointer?
    private let pending = Mutex<[@Sendable () -> Void]>([])
    var signalHandlers: [SignalHandler] = []
    var attachments: [AnyObject] = []

    /// Turns on libevent's locking once per process, before any base exists.
    private static let threadingEnabled: Bool = {
        evthread_use_pthreads() == 0
    }()

    public init() {
        precondition(Self.threadingEnabled, "evthread_use_pthreads failed")
        guard let base = event_base_new() else { fatalError("event_base_new failed") }
        self.base = base
        let context = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(base, -1, 0, { _, _, context in
            Unmanaged<EventLoop>.fromOpaque(context!).takeUnretainedValue().drainPending()
        }, context)
    }

    deinit {
        signalHandlers.removeAll()
        attachments.removeAll()
        if let wakeEvent { event_free(wakeEvent) }
        event_base_free(base)
    }

    /// The raw `event_base`, for wrappers in other modules (Redis) that attach to this loop.
    public var rawBase: OpaquePointer { base }

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
    }

    /// Runs `work` on the loop thread soon. Safe to call from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        pending.withLock { $0.append(work) }
        event_active(wakeEvent, 0, 0)
    }

    /// Makes `run()` return after the current callbacks. Safe to call from any thread.
    public func stop() {
        execute { [self] in event_base_loopbreak(self.base) }
    }

    private func drainPending() {
        let work = pending.withLock { queue -> [@Sendable () -> Void] in
            let taken = queue
            queue.removeAll(keepingCapacity: true)
            return taken
        }
        for item in work { item() }
    }
}

/// A one-shot or re-armable timer on an event loop. Loop thread only.
public final class EventTimer {
    private var event: OpaquePointer?
    private let callback: () -> Void

    public init(loop: EventLoop, _ callback: @escaping () -> Void) {
        self.callback = callback
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = ag_evtimer_new(loop.base, { _, _, context in
            Unmanaged<EventTimer>.fromOpaque(context!).takeUnretainedValue().callback()
        }, context)
    }

    deinit {
        if let event { event_free(event) }
    }

    /// (Re)starts the timer to fire once after `delay`.
    public func arm(after delay: Duration) {
        var tv = timeval(delay)
        ag_evtimer_add(event, &tv)
    }

    /// Stops the timer if armed.
    public func cancel() {
        ag_evtimer_del(event)
    }
}

extension timeval {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: Int(max(0, seconds)), tv_usec: Int(max(0, attoseconds / 1_000_000_000_000)))
    }
}

/// Signal handling and an owner slot, both loop-thread only.
extension EventLoop {
    /// Runs `handler` on this loop whenever `signal` arrives (libevent's self-pipe: safe).
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) {
        let box = SignalHandler(handler)
        let context = Unmanaged.passUnretained(box).toOpaque()
        box.event = ag_evsignal_new(base, signal, { _, _, context in
            Unmanaged<SignalHandler>.fromOpaque(context!).takeUnretainedValue().handler()
        }, context)
        event_add(box.event, nil)
        signalHandlers.append(box)
    }

    /// Keeps `object` alive with the loop, for retrieval on the loop thread.
    public func register(_ object: AnyObject) {
        attachments.append(object)
    }

    /// The first registered object of type `T`.
    public func registered<T: AnyObject>(_ type: T.Type) -> T? {
        attachments.lazy.compactMap { $0 as? T }.first
    }
}

final class SignalHandler {
    let handler: () -> Void
    var event: OpaquePointer?

    init(_ handler: @escaping () -> Void) {
        self.handler = handler
    }

    deinit {
        if let event { event_free(event) }
    }
}
