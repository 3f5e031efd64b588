#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include "ag_hiredis.h"

/*
 * A libevent adapter for hiredis's async API, in place of adapters/libevent.h (whose functions
 * are static, and which deletes and re-adds the read event on every reply and arms EV_WRITE for
 * every command: four epoll_ctl calls per command).
 *
 * - The read event is persistent and added once.
 * - A new command does not arm EV_WRITE: it activates a socketless "flush" event that writes
 *   every command queued in this loop iteration in one go (natural pipelining). EV_WRITE is
 *   armed only while connecting and when the socket did not take everything.
 * - hiredis may free the context (and call `cleanup`) inside any call into it, so nothing here
 *   touches the adapter state after calling hiredis; the thread-local `writing` marks which
 *   context is inside redisAsyncHandleWrite without dereferencing it.
 */
typedef struct {
    redisAsyncContext *context;
    struct event *read_event;
    struct event *write_event;
    struct event *flush_event;
    int reading;
    int write_armed;
} ag_redis_events;

static __thread ag_redis_events *writing = NULL;

static void ag_redis_handle_write(ag_redis_events *events) {
    redisAsyncContext *context = events->context;
    writing = events;
    redisAsyncHandleWrite(context);
    writing = NULL;
}

static void ag_redis_read_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    redisAsyncHandleRead(((ag_redis_events *)arg)->context);
}

static void ag_redis_write_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    ag_redis_events *events = arg;
    events->write_armed = 0;
    ag_redis_handle_write(events);
}

static void ag_redis_flush_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd; (void)what;
    ag_redis_handle_write(arg);
}

static void ag_redis_add_read(void *privdata) {
    ag_redis_events *events = privdata;
    if (!events->reading) {
        events->reading = 1;
        event_add(events->read_event, NULL);
    }
}

static void ag_redis_del_read(void *privdata) {
    ag_redis_events *events = privdata;
    if (events->reading) {
        events->reading = 0;
        event_del(events->read_event);
    }
}

static void ag_redis_add_write(void *privdata) {
    ag_redis_events *events = privdata;
    if (writing == events || !(events->context->c.flags & REDIS_CONNECTED)) {
        if (!events->write_armed) {
            events->write_armed = 1;
            event_add(events->write_event, NULL);
        }
    } else {
        event_active(events->flush_event, EV_WRITE, 1);
    }
}

static void ag_redis_del_write(void *privdata) {
    ag_redis_events *events = privdata;
    if (events->write_armed) {
        events->write_armed = 0;
        event_del(events->write_event);
    }
}

static void ag_redis_cleanup(void *privdata) {
    ag_redis_events *events = privdata;
    if (writing == events) writing = NULL;
    event_free(events->read_event);
    event_free(events->write_event);
    event_free(events->flush_event);
    free(events);
}

int ag_redis_attach_libevent(struct redisAsyncContext *ac, struct event_base *base) {
    if (ac->ev.data != NULL) return REDIS_ERR;
    ag_redis_events *events = calloc(1, sizeof(ag_redis_events));
    if (events == NULL) return REDIS_ERR;
    events->context = ac;
    events->read_event = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, ag_redis_read_cb, events);
    events->write_event = event_new(base, ac->c.fd, EV_WRITE, ag_redis_write_cb, events);
    events->flush_event = event_new(base, -1, 0, ag_redis_flush_cb, events);
    if (events->read_event == NULL || events->write_event == NULL || events->flush_event == NULL) {
        if (events->read_event) event_free(events->read_event);
        if (events->write_event) event_free(events->write_event);
        if (events->flush_event) event_free(events->flush_event);
        free(events);
        return REDIS_ERR;
    }
    ac->ev.addRead = ag_redis_add_read;
    ac->ev.delRead = ag_redis_del_read;
    ac->ev.addWrite = ag_redis_add_write;
    ac->ev.delWrite = ag_redis_del_write;
    ac->ev.cleanup = ag_redis_cleanup;
    ac->ev.data = events;
    return REDIS_OK;
}
