// libevent's event-config.h defines _GNU_SOURCE; include the C library first so that every
// module (Glibc, Dispatch, CYAML, …) sees the same definitions of shared types like fd_set.
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
// Declares `struct ssl_st` only (no OpenSSL header), so it does not clash with COpenSSL.
#include <event2/bufferevent_ssl.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>
#include <event2/dns.h>
