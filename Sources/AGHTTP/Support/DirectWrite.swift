internal import CEvent

/// Writes a bufferevent's queued output straight to its socket, from inside our own code.
///
/// A socket bufferevent freezes the front of its output buffer: only libevent's own write
/// callback may drain it, and `evbuffer_write` on a frozen buffer fails without a system call.
/// So the front is unfrozen for the one write and frozen again, exactly as libevent's callback
/// does around its own write. Without this every answer went out through EV_WRITE: two
/// `epoll_ctl` calls and a loop iteration per write. Returns what `evbuffer_write` returned.
@discardableResult
func writeQueuedOutput(_ output: OpaquePointer, to fd: Int32) -> Int32 {
    evbuffer_unfreeze(output, 1)
    let written = evbuffer_write(output, fd)
    evbuffer_freeze(output, 1)
    return written
}
