#ifndef AG_EVENT_H
#define AG_EVENT_H
// Forward declarations only: including libevent here would clash with the CEvent module.
struct event_base;
struct event;
struct timeval;

/// `evtimer_new`/`evtimer_add`/`evtimer_del`/`evsignal_new` are macros.
struct event *ag_evtimer_new(struct event_base *base, void (*cb)(int, short, void *), void *arg);
int ag_evtimer_add(struct event *ev, const struct timeval *tv);
int ag_evtimer_del(struct event *ev);
struct event *ag_evsignal_new(struct event_base *base, int sig, void (*cb)(int, short, void *), void *arg);

/// An `event_base` without libevent's internal lock (`EVENT_BASE_FLAG_NOLOCK`): every base of
/// the gateway is used by its own thread only, and other threads wake it through an eventfd.
struct event_base *ag_event_base_new_unlocked(void);
/// A non-blocking, close-on-exec eventfd (-1 on failure).
int ag_wake_open(void);
/// Adds one to the eventfd's counter: safe from any thread (a plain write(2)).
void ag_wake_signal(int fd);
/// Resets the eventfd's counter (a read that finds it at 0 returns at once).
void ag_wake_drain(int fd);

/// Bytes written to socket `fd` that the peer has not acknowledged yet (`SIOCOUTQ`), 0 when
/// it cannot be read: what a close with `SO_LINGER` 0 would throw away.
int ag_socket_unsent_bytes(int fd);

struct evbuffer;
/// The socket reads below use recv and recvmsg, not read and readv: those go through the file
/// layer first (`vfs_read`), ~0.4 us of kernel time per proxied request on this machine's
/// profile that nginx, which uses recv, does not spend. `fd` must be a socket.
///
/// Reads at most `limit` bytes from `fd` into the end of `buffer` with one recvmsg (no FIONREAD
/// query first): the count read, 0 at end of stream, -1 with errno on failure.
long ag_read_socket(struct evbuffer *buffer, int fd, unsigned long limit);
/// `ag_read_socket` for small reads (at most 4 KiB): into a stack buffer with one recv, then
/// copied to the end of `buffer`, whose new chain (if it needs one) is then small. Reserving
/// space first made a chain of the full read size (16 KiB), which malloc serves from its bins
/// rather than its per-thread cache, on every request.
long ag_read_socket_small(struct evbuffer *buffer, int fd, unsigned long limit);
/// One recv of at most `limit` bytes (at most 4 KiB) into the calling thread's scratch buffer,
/// set in `*bytes`; valid until the thread's next call. The count read, 0 at end of stream,
/// -1 with errno on failure.
long ag_read_socket_scratch(int fd, unsigned long limit, const unsigned char **bytes);
#endif
