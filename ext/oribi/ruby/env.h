/*
 * Builds the Rack 3 env Hash from a parsed request (with the GVL held):
 * interned frozen keys, header fields as HTTP_*, REMOTE_ADDR for IPv4,
 * IPv6 and unix peers, rack.protocol from an Upgrade request.
 */
#ifndef ORIBI_ENV_H
#define ORIBI_ENV_H

#include <ruby.h>

#include "loop/conn.h"

struct oribi_env_listener {
    VALUE server_name; /* used when the request names no host */
    VALUE server_port;
    int is_unix;
    int tls; /* https: rack.url_scheme, HTTPS on, port 443 when the host names none */
};

struct oribi_env_ctx {
    struct oribi_env_listener *listeners;
    VALUE multiprocess;
    VALUE multithread;
    int early_hints;   /* env["rack.early_hints"] is given (HTTP/1.1 requests) */
    VALUE empty_input; /* rack.input without a body: Oribi::EmptyInput's, shared and stateless */
    VALUE no_mark;     /* env["puma.mark_as_io_bound"] without io_threads: does nothing, shared and frozen */
    VALUE url_scheme;  /* rack.url_scheme: url_scheme, else nil for "http" */
    VALUE tmpl;        /* the pairs every env has, copied per request */
    VALUE tmpl_errors; /* rb_stderr when tmpl was built */
    /* tmpl also holds the last request's method, peer and host values
     * (env.c, tmpl_*): what they were, to compare the next one with */
    VALUE t_method;           /* Qundef: none yet */
    unsigned char t_peer[17]; /* address family, then the address */
    int t_host_set;           /* t_host* below are valid */
    int t_host_listener;      /* the listener named when no host was, else -1 */
    size_t t_host_len;
    char t_host[64];
};

void oribi_env_init(void);

/* A frozen, interned String kept alive for good: for the keys the engine
 * compares and inserts on every request. */
VALUE oribi_fstr(const char *s);
/* What a request has of its own and nothing else shares (docs/RACK.md):
 * its input, and the callables that act on it alone (exchange.h, tickets). */
struct oribi_env_own {
    VALUE input;
    VALUE hijack;
    VALUE early_hints; /* nil when ctx->early_hints is off */
    VALUE io_bound;    /* env["puma.mark_as_io_bound"] with io_threads, else nil (ctx->no_mark) */
};

/* ctx->multiprocess, multithread, early_hints, empty_input and no_mark must be set. */
VALUE oribi_env_build(struct oribi_env_ctx *ctx, struct oribi_conn *c, const struct oribi_env_own *own);

/* REMOTE_ADDR from the first address in the request's field name (len
 * bytes; its first such field, up to a comma), when it is one (IPv4 or
 * IPv6, nothing else around it); else env is left as it was. For a peer
 * the caller trusts (remote_addr_header). */
void oribi_env_remote_addr_from(VALUE env, const struct oribi_request *r, const char *name, size_t len);

/* Frozen keys shared with the engine. */
extern VALUE oribi_key_input, oribi_key_request_method;

#endif
