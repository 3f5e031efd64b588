internal import CEvent

/// The bound on a connection's buffered input, armed only once it is reached.
///
/// libevent's read high watermark does the bounding (reading is suspended at the mark and
/// resumed below it), but while it is set every change of the input buffer runs its callback,
/// and each one below the mark re-enables reading: an `event_add` that also re-arms the read
/// timeout. On a proxied request that was five `event_add`s for nothing, since almost no
/// connection ever nears the mark. So a plain socket starts without the watermark, and the read
/// callback calls `check` after handling what arrived: the first time the input holds `limit`
/// bytes or more, the watermark is set, which suspends reading at once and from then on works
/// as before. A socket bufferevent calls the read callback after every read, and one read takes
/// at most 16 KiB, so the input never exceeds `limit` by more than one read.
///
/// A TLS bufferevent may decrypt several records before calling back, so it gets the watermark
/// from the start (`armNow`).
struct ReadBound {
    let limit: Int
    private(set) var armed: Bool

    init(limit: Int, armNow: Bool) {
        self.limit = limit
        armed = armNow
    }

    /// Sets the watermark on a new bufferevent when it is armed from the start.
    func start(_ bev: OpaquePointer) {
        if armed { bufferevent_setwatermark(bev, Int16(EV_READ), 0, limit) }
    }

    /// Called after each read callback: sets the watermark once the input reaches the limit.
    mutating func check(_ bev: OpaquePointer?, input: OpaquePointer) {
        guard !armed, let bev, evbuffer_get_length(input) >= limit else { return }
        armed = true
        bufferevent_setwatermark(bev, Int16(EV_READ), 0, limit)
    }
}
