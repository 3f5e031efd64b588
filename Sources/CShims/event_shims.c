#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <event2/buffer.h>
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

long ag_read_socket_scratch(int fd, unsigned long limit, const unsigned char **bytes) {
    static __thread unsigned char scratch[4096];
    size_t want = limit < sizeof scratch ? (size_t)limit : sizeof scratch;
    *bytes = scratch;
    return recv(fd, scratch, want, 0);
}

long ag_read_socket_small(struct evbuffer *buffer, int fd, unsigned long limit) {
    unsigned char scratch[4096];
    size_t want = limit < sizeof scratch ? (size_t)limit : sizeof scratch;
    ssize_t got = recv(fd, scratch, want, 0);
    if (got > 0 && evbuffer_add(buffer, scratch, (size_t)got) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return got;
}

long ag_read_socket(struct evbuffer *buffer, int fd, unsigned long limit) {
    struct evbuffer_iovec space[2];
    int count = evbuffer_reserve_space(buffer, (ev_ssize_t)limit, space, 2);
    if (count <= 0) {
        errno = ENOMEM;
        return -1;
    }
    struct iovec vectors[2];
    size_t offered = 0;
    for (int i = 0; i < count; i++) {
        size_t length = space[i].iov_len;
        if (length > limit - offered) length = limit - offered;
        vectors[i].iov_base = space[i].iov_base;
        vectors[i].iov_len = length;
        offered += length;
    }
    struct msghdr message = { .msg_iov = vectors, .msg_iovlen = (size_t)count };
    ssize_t got = recvmsg(fd, &message, 0);
    if (got <= 0) {
        int saved = errno;
        evbuffer_commit_space(buffer, space, 0);
        errno = saved;
        return got;
    }
    size_t left = (size_t)got;
    int used = 0;
    for (int i = 0; i < count && left > 0; i++) {
        size_t length = vectors[i].iov_len < left ? vectors[i].iov_len : left;
        space[i].iov_len = length;
        left -= length;
        used++;
    }
    evbuffer_commit_space(buffer, space, used);
    return got;
}

int ag_socket_unsent_bytes(int fd) {
    int unsent = 0;
    return ioctl(fd, SIOCOUTQ, &unsent) == 0 ? unsent : 0;
}
