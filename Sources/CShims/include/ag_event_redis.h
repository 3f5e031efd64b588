#ifndef AG_EVENT_REDIS_H
#define AG_EVENT_REDIS_H
struct event;

/// `event_free`, for Swift modules that import CHiredis and so cannot also import CEvent:
/// libevent's event-config.h defines _GNU_SOURCE, and the two modules' `fd_set` then clash.
void ag_event_free(struct event *ev);
#endif
