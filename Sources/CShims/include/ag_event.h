#ifndef AG_EVENT_H
#define AG_EVENT_H
#include <event2/event.h>
#include <event2/http.h>
#include <event2/buffer.h>

/// `evtimer_new`/`evtimer_add` and friends are macros.
struct event *ag_evtimer_new(struct event_base *base, event_callback_fn cb, void *arg);
int ag_evtimer_add(struct event *ev, const struct timeval *tv);
int ag_evtimer_del(struct event *ev);
struct event *ag_evsignal_new(struct event_base *base, int sig, event_callback_fn cb, void *arg);
#endif
