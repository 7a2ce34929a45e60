/* A TLS listener's settings, Oribi::TLSContext (tls_context.c). */
#ifndef ORIBI_TLS_CONTEXT_H
#define ORIBI_TLS_CONTEXT_H
#include <ruby.h>

struct ssl_ctx_st;

/* The OpenSSL context an Oribi::TLSContext holds; raises unless ctx is one. */
struct ssl_ctx_st *oribi_tls_context(VALUE ctx);

#endif
