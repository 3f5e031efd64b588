internal import CEvent
internal import CShims
internal import Glibc

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
    /// The one `Duration` → `timeval` conversion of the package; negative durations become zero.
    package init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: Int(max(0, seconds)), tv_usec: Int(max(0, attoseconds / 1_000_000_000_000)))
    }
}
