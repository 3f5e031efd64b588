#ifndef AG_HIREDIS_H
#define AG_HIREDIS_H
// Forward declarations only: including hiredis here would clash with the CHiredis module.
struct redisAsyncContext;
struct event_base;

/// Attaches an async hiredis context to a libevent base (adapters/libevent.h is all `static`).
int ag_redis_attach_libevent(struct redisAsyncContext *ac, struct event_base *base);
#endif
