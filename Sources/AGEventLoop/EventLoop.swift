internal import CEvent
internal import CShims
internal import Glibc
import AGSync
import Synchronization

/// One libevent `event_base`, driven by exactly one thread.
///
/// Everything that touches the base (servers, connections, Redis, timers) is created and used on
/// the loop's own thread; other threads may only hand it work through `execute(_:)`.
public final class EventLoop: @unchecked Sendable {
    // Invariant: `base` is used only on the loop thread (or before `run()` by the thread that
    // sets the loop up, or after it returns); other threads touch only the mutex-guarded queues
    // and `wakeFD`. The base therefore has no lock of its own (`EVENT_BASE_FLAG_NOLOCK`): with
    // one, every event_add/del and activation took and released a mutex, ~17 pairs per
    // proxied request.
    /// The `event_base`, for the wrapper modules of this package (HTTP, Redis) that attach C
    /// objects to the loop; it never leaves the package.
    package let base: OpaquePointer
    /// The thread running the loop (`pthread_t` bits), 0 until `run()`.
    private let owner = Atomic<UInt>(0)
    /// An eventfd that other threads write to wake the loop for `pending`/`cleanups`.
    private let wakeFD: Int32
    /// Reads `wakeFD` (persistent), then runs the queued work.
    private var wakeEvent: OpaquePointer?
    private let pending = Locked<[@Sendable () -> Void]>([])
    /// Work that frees something of the base's (an evdns base): run by the loop like `pending`,
    /// or, once the loop has stopped, after `run()` returns or before the base is freed.
    private let cleanups = Locked<[@Sendable () -> Void]>([])
    /// Outlives the loop for objects that must know whether its `event_base` still exists.
    package let lifetime = LoopLifetime()
    var signalHandlers: [SignalHandler] = []
    /// Every resolver made on this loop, shut down when `run()` returns (loop thread only).
    private var resolvers: [WeakResolver] = []
    var attachments: [AnyObject] = []

    /// Turns on libevent's locking once per process, before any base exists: its process-wide
    /// state (signal dispatch, evdns bases) is shared between loops; the bases themselves are
    /// made without a lock.
    private static let threadingEnabled: Bool = {
        evthread_use_pthreads() == 0
    }()

    public init() {
        precondition(Self.threadingEnabled, "evthread_use_pthreads failed")
        guard let base = ag_event_base_new_unlocked() else { fatalError("event_base_new failed") }
        self.base = base
        wakeFD = ag_wake_open()
        precondition(wakeFD >= 0, "eventfd failed")
        let context = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(base, wakeFD, Int16(EV_READ | EV_PERSIST), { fd, _, context in
            ag_wake_drain(fd)
            Unmanaged<EventLoop>.fromOpaque(context!).takeUnretainedValue().drainPending()
        }, context)
        event_add(wakeEvent, nil)
    }

    deinit {
        runCleanups()
        signalHandlers.removeAll()
        attachments.removeAll()
        if let wakeEvent { event_free(wakeEvent) }
        close(wakeFD)
        event_base_free(base)
        lifetime.ended.store(true, ordering: .releasing)
    }

    /// Runs the loop on the calling thread until `stop()`; that thread owns the loop from now on.
    ///
    /// When it returns, the loop lets go of what it kept alive (registered objects, signal
    /// handlers, work queued too late to run), on its own thread: those objects usually hold
    /// the loop in turn, and the cycle would otherwise outlive the shutdown (every stopped
    /// gateway of a test process, and what LeakSanitizer reports at exit). Cleanups
    /// (`executeCleanup`) still run.
    public func run() {
        owner.store(UInt(pthread_self()), ordering: .releasing)
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
        for resolver in resolvers { resolver.value?.shutDown() }
        resolvers.removeAll()
        let late = pending.withLock { queue -> [@Sendable () -> Void] in
            defer { queue.removeAll() }
            return queue
        }
        withExtendedLifetime(late) {}
        runCleanups()
        signalHandlers.removeAll()
        attachments.removeAll()
    }

    /// Whether the caller may touch loop-bound state: it runs on the loop's thread, or the loop
    /// has not started yet (set-up on the thread that will run it).
    public var isOwnedByCurrentThread: Bool {
        let owner = owner.load(ordering: .acquiring)
        return owner == 0 || pthread_equal(pthread_t(owner), pthread_self()) != 0
    }

    /// Runs `work` on the loop thread soon. Safe to call from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        pending.withLock { $0.append(work) }
        wake()
    }

    /// Runs `work`, which frees something of this loop's base, on the loop thread soon; if the
    /// loop stops first, after `run()` returns, or else before the base is freed. Unlike
    /// `execute`'s work it is never dropped: dropped, an evdns base was left behind (seen by
    /// LeakSanitizer at exit when a resolver was released while its loop stopped).
    package func executeCleanup(_ work: @escaping @Sendable () -> Void) {
        cleanups.withLock { $0.append(work) }
        wake()
    }

    /// Makes the loop drain its queues soon: on its own thread by activating the wake event
    /// (no system call), from any other thread through the eventfd (the base has no lock, so
    /// only its own thread may activate events).
    private func wake() {
        let owner = owner.load(ordering: .acquiring)
        if owner != 0, pthread_equal(pthread_t(owner), pthread_self()) != 0 {
            event_active(wakeEvent, Int32(EV_READ), 0)
        } else {
            ag_wake_signal(wakeFD)
        }
    }

    private func runCleanups() {
        let work = cleanups.withLock { queue -> [@Sendable () -> Void] in
            defer { queue.removeAll() }
            return queue
        }
        for item in work { item() }
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
        runCleanups()
    }
}

/// Whether a loop's `event_base` has been freed; held by objects that may outlive the loop.
package final class LoopLifetime: Sendable {
    package let ended = Atomic<Bool>(false)
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

/// A resolver the loop shuts down without keeping it alive.
private struct WeakResolver {
    weak var value: DNSResolver?
}

extension EventLoop {
    /// Called by `DNSResolver.init`, on the loop's thread or before it runs.
    func adopt(_ resolver: DNSResolver) {
        resolvers.removeAll { $0.value == nil }
        resolvers.append(WeakResolver(value: resolver))
    }
}
