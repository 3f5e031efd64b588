#ifndef ATTESTGATE_CSHIMS_H
#define ATTESTGATE_CSHIMS_H
// Only what Swift cannot import from the C libraries on its own: static adapter functions,
// function-like macros and a few convenience re-declarations. One header per library.
#include "ag_hiredis.h"
#include "ag_openssl.h"
#include "ag_event.h"
#include "ag_bytes.h"
#endif
