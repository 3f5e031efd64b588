#ifndef AG_OPENSSL_H
#define AG_OPENSSL_H
// Forward declarations only: including OpenSSL here would clash with the COpenSSL module.
struct bio_st;
struct ssl_ctx_st;
struct ssl_st;

/// `BIO_get_mem_data` is a macro.
long ag_bio_get_mem_data(struct bio_st *bio, char **out);
/// `OPENSSL_free` is a macro.
void ag_openssl_free(void *ptr);
/// `SSL_CTX_set_min_proto_version` is a macro.
int ag_ssl_ctx_set_min_proto_version(struct ssl_ctx_st *ctx, int version);
/// `SSL_CTX_set_mode` is a macro.
long ag_ssl_ctx_set_mode(struct ssl_ctx_st *ctx, long mode);
/// `SSL_set_tlsext_host_name` (SNI) is a macro.
int ag_ssl_set_tlsext_host_name(struct ssl_st *ssl, const char *name);
/// `ERR_GET_LIB` / `ERR_GET_REASON` are inline functions over macros; a system error (errno)
/// reports library 0 here.
int ag_err_get_lib(unsigned long code);
int ag_err_get_reason(unsigned long code);
/// `SSL_OP_*` are built with the function-like macro `SSL_OP_BIT`, which Swift cannot import.
extern const unsigned long long ag_ssl_op_cipher_server_preference;
extern const unsigned long long ag_ssl_op_no_renegotiation;
extern const unsigned long long ag_ssl_op_ignore_unexpected_eof;
extern const unsigned long long ag_ssl_op_no_compression;
#endif
