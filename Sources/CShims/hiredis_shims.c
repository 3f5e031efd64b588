#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#include "ag_hiredis.h"

int ag_redis_attach_libevent(struct redisAsyncContext *ac, struct event_base *base) {
    return redisLibeventAttach(ac, base);
}
