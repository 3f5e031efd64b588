#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include "ag_openssl.h"

long ag_bio_get_mem_data(struct bio_st *bio, char **out) { return BIO_get_mem_data(bio, out); }
void ag_openssl_free(void *ptr) { OPENSSL_free(ptr); }
int ag_ssl_ctx_set_min_proto_version(struct ssl_ctx_st *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
long ag_ssl_ctx_set_mode(struct ssl_ctx_st *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
int ag_ssl_set_tlsext_host_name(struct ssl_st *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
int ag_err_get_lib(unsigned long code) { return ERR_SYSTEM_ERROR(code) ? 0 : ERR_GET_LIB(code); }
int ag_err_get_reason(unsigned long code) { return ERR_GET_REASON(code); }

const unsigned long long ag_ssl_op_cipher_server_preference = SSL_OP_CIPHER_SERVER_PREFERENCE;
const unsigned long long ag_ssl_op_no_renegotiation = SSL_OP_NO_RENEGOTIATION;
const unsigned long long ag_ssl_op_ignore_unexpected_eof = SSL_OP_IGNORE_UNEXPECTED_EOF;
const unsigned long long ag_ssl_op_no_compression = SSL_OP_NO_COMPRESSION;
