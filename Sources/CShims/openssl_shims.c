#include <openssl/bio.h>
#include <openssl/crypto.h>
#include "ag_openssl.h"

long ag_bio_get_mem_data(struct bio_st *bio, char **out) { return BIO_get_mem_data(bio, out); }
void ag_openssl_free(void *ptr) { OPENSSL_free(ptr); }
