internal import CEvent
#if canImport(Glibc)
import Glibc
#endif

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

/// Nothing is queued in the bufferevent's `output` and no write is armed: bytes sent straight
/// to the socket now overtake nothing (`sendOrQueue`'s precondition).
func canSendNow(_ bev: OpaquePointer, _ output: OpaquePointer) -> Bool {
    evbuffer_get_length(output) == 0 && bufferevent_get_enabled(bev) & Int16(EV_WRITE) == 0
}

/// Sends `bytes` to the socket at once, queueing in `output` only what the socket did not take
/// and arming EV_WRITE for it. Only when `canSendNow`.
///
/// The common answer and upstream request leave in one `send` from the buffer they were
/// built in: no chain allocated, filled, written and freed in libevent (~1,000 instructions
/// per write). A failed send queues everything: the armed write then meets the same error and
/// reports it through the bufferevent's event callback, exactly as a failed
/// `writeQueuedOutput` does. `MSG_NOSIGNAL`: a peer gone raises no SIGPIPE.
func sendOrQueue(_ bytes: UnsafeRawBufferPointer, on bev: OpaquePointer, fd: Int32, queueingIn output: OpaquePointer) {
    guard let start = bytes.baseAddress, !bytes.isEmpty else { return }
    let sent = send(fd, start, bytes.count, Int32(MSG_NOSIGNAL))
    let taken = sent > 0 ? sent : 0
    guard taken < bytes.count else { return }
    evbuffer_add(output, start + taken, bytes.count - taken)
    bufferevent_enable(bev, Int16(EV_WRITE))
}
