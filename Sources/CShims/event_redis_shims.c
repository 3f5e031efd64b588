#include "ag_event_redis.h"
#include <event2/event.h>

void ag_event_free(struct event *ev) { event_free(ev); }
