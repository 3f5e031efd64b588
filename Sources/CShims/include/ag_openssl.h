#ifndef AG_OPENSSL_H
#define AG_OPENSSL_H
#include <openssl/bio.h>
#include <openssl/crypto.h>

/// `BIO_get_mem_data` is a macro.
long ag_bio_get_mem_data(BIO *bio, char **out);
/// `OPENSSL_free` is a macro.
void ag_openssl_free(void *ptr);
#endif
