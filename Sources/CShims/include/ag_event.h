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
/// A base without libevent's lock (`EVENT_BASE_FLAG_NOLOCK`): only its own thread touches it;
/// other threads wake it through an eventfd (`ag_wake_fd_*`) instead of `event_active`.
struct event_base *ag_event_base_new_single_threaded(void);
/// A non-blocking, close-on-exec eventfd; -1 on failure.
int ag_wake_fd_new(void);
/// Adds one to the eventfd's counter (any thread).
void ag_wake_fd_signal(int fd);
/// Resets the eventfd's counter (the loop thread, when woken).
void ag_wake_fd_drain(int fd);
#endif
