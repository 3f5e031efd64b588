#ifndef AG_OPENSSL_H
#define AG_OPENSSL_H
// Forward declarations only: including OpenSSL here would clash with the COpenSSL module.
struct bio_st;

/// `BIO_get_mem_data` is a macro.
long ag_bio_get_mem_data(struct bio_st *bio, char **out);
/// `OPENSSL_free` is a macro.
void ag_openssl_free(void *ptr);
#endif
