#ifndef AG_HIREDIS_H
#define AG_HIREDIS_H
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
struct event_base;

/// Attaches an async hiredis context to a libevent base (adapters/libevent.h is all `static`).
int ag_redis_attach_libevent(redisAsyncContext *ac, struct event_base *base);
#endif
