#include <event2/event.h>
#include "ag_event.h"

struct event *ag_evtimer_new(struct event_base *base, void (*cb)(int, short, void *), void *arg) {
    return evtimer_new(base, cb, arg);
}
int ag_evtimer_add(struct event *ev, const struct timeval *tv) { return evtimer_add(ev, tv); }
int ag_evtimer_del(struct event *ev) { return evtimer_del(ev); }
struct event *ag_evsignal_new(struct event_base *base, int sig, void (*cb)(int, short, void *), void *arg) {
    return evsignal_new(base, sig, cb, arg);
}
