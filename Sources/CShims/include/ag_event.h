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
#endif
