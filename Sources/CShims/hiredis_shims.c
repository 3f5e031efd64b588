#include "ag_hiredis.h"
#include <hiredis/adapters/libevent.h>

int ag_redis_attach_libevent(redisAsyncContext *ac, struct event_base *base) {
    return redisLibeventAttach(ac, base);
}
