#include <event2/event.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "ag_event.h"

struct event *ag_evtimer_new(struct event_base *base, void (*cb)(int, short, void *), void *arg) {
    return evtimer_new(base, cb, arg);
}
int ag_evtimer_add(struct event *ev, const struct timeval *tv) { return evtimer_add(ev, tv); }
int ag_evtimer_del(struct event *ev) { return evtimer_del(ev); }
struct event *ag_evsignal_new(struct event_base *base, int sig, void (*cb)(int, short, void *), void *arg) {
    return evsignal_new(base, sig, cb, arg);
}

struct event_base *ag_event_base_new_unlocked(void) {
    struct event_config *config = event_config_new();
    if (!config) return NULL;
    event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
    struct event_base *base = event_base_new_with_config(config);
    event_config_free(config);
    return base;
}
int ag_wake_open(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
void ag_wake_signal(int fd) {
    uint64_t one = 1;
    // EAGAIN only when the counter is at its maximum: the loop has a wake pending anyway.
    (void)!write(fd, &one, sizeof one);
}
void ag_wake_drain(int fd) {
    uint64_t count;
    (void)!read(fd, &count, sizeof count);
}
