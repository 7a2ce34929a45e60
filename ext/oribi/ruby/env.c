#include "ruby/env.h"
#include "http/proxy_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ruby/oribi.h"
#include "loop/tls.h"

#if !defined(HAVE_RB_HASH_NEW_CAPA) && defined(HAVE_RB_HASH_NEW_WITH_SIZE)
VALUE rb_hash_new_with_size(st_index_t size); /* exported, not declared, in Ruby 3.1 */
#define rb_hash_new_capa(n) rb_hash_new_with_size(n)
#elif !defined(HAVE_RB_HASH_NEW_CAPA)
#define rb_hash_new_capa(n) rb_hash_new()
#endif

VALUE oribi_key_input, oribi_key_request_method;
static VALUE k_script_name, k_path_info, k_query_string, k_request_uri, k_server_name, k_server_port, k_server_protocol,
    k_server_software, k_remote_addr, k_content_length, k_content_type, k_rack_errors, k_url_scheme, k_multithread,
    k_multiprocess, k_run_once, k_hijack_p, k_http_host, k_hijack, k_early_hints, k_response_finished, k_protocol,
    k_io_bound;
static VALUE v_empty, v_http, v_http10, v_http11, v_software, v_localhost_ip, v_port80;
static VALUE k_https, v_https, v_on, v_port443, k_client_cert, k_peercert;

VALUE oribi_fstr(const char *s)
{
    VALUE v = rb_interned_str_cstr(s);
    rb_gc_register_mark_object(v);
    return v;
}

/* Methods and header keys seen on nearly every request are looked up in
 * small tables instead of being built and interned each time. */
static const char *const methods[] = {"GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))
static VALUE method_vals[NMETHODS];

static const char *const common_fields[] = {
    "host",
    "user-agent",
    "accept",
    "accept-encoding",
    "accept-language",
    "accept-charset",
    "connection",
    "cookie",
    "referer",
    "origin",
    "cache-control",
    "pragma",
    "keep-alive",
    "upgrade-insecure-requests",
    "if-modified-since",
    "if-none-match",
    "authorization",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "x-request-id",
    "x-request-start",
    "x-requested-with",
    "x-csrf-token",
    "dnt",
    "te",
    "upgrade",
    "range",
    "sec-fetch-dest",
    "sec-fetch-mode",
    "sec-fetch-site",
    "sec-fetch-user",
    "sec-ch-ua",
    "sec-ch-ua-mobile",
    "sec-ch-ua-platform",
    "via",
    "forwarded",
    "expect",
    "if-match",
    "if-range",
    "priority",
    "version",
};
#define NCOMMON (sizeof(common_fields) / sizeof(common_fields[0]))
static VALUE common_keys[NCOMMON];
static unsigned char common_lens[NCOMMON];

static size_t field_key(char *out, const char *name, size_t len)
{
    memcpy(out, "HTTP_", 5);
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        out[5 + i] = ch == '-' ? '_' : (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
    }
    return 5 + len;
}

void oribi_env_init(void)
{
    oribi_key_input = oribi_fstr("rack.input");
    oribi_key_request_method = oribi_fstr("REQUEST_METHOD");
    k_script_name = oribi_fstr("SCRIPT_NAME");
    k_path_info = oribi_fstr("PATH_INFO");
    k_query_string = oribi_fstr("QUERY_STRING");
    k_request_uri = oribi_fstr("REQUEST_URI");
    k_server_name = oribi_fstr("SERVER_NAME");
    k_server_port = oribi_fstr("SERVER_PORT");
    k_server_protocol = oribi_fstr("SERVER_PROTOCOL");
    k_server_software = oribi_fstr("SERVER_SOFTWARE");
    k_remote_addr = oribi_fstr("REMOTE_ADDR");
    k_content_length = oribi_fstr("CONTENT_LENGTH");
    k_content_type = oribi_fstr("CONTENT_TYPE");
    k_rack_errors = oribi_fstr("rack.errors");
    k_url_scheme = oribi_fstr("rack.url_scheme");
    k_multithread = oribi_fstr("rack.multithread");
    k_multiprocess = oribi_fstr("rack.multiprocess");
    k_run_once = oribi_fstr("rack.run_once");
    k_hijack_p = oribi_fstr("rack.hijack?");
    k_io_bound = oribi_fstr("puma.mark_as_io_bound"); /* the name apps written for Puma 8 call */
    k_hijack = oribi_fstr("rack.hijack");
    k_early_hints = oribi_fstr("rack.early_hints");
    k_response_finished = oribi_fstr("rack.response_finished");
    k_protocol = oribi_fstr("rack.protocol");
    k_http_host = oribi_fstr("HTTP_HOST");
    v_empty = oribi_fstr("");
    v_http = oribi_fstr("http");
    v_http10 = oribi_fstr("HTTP/1.0");
    v_http11 = oribi_fstr("HTTP/1.1");
    v_software = oribi_fstr("Oribi");
    v_localhost_ip = oribi_fstr("127.0.0.1");
    v_port80 = oribi_fstr("80");
    k_https = oribi_fstr("HTTPS");
    v_https = oribi_fstr("https");
    v_on = oribi_fstr("on");
    v_port443 = oribi_fstr("443");
    k_client_cert = oribi_fstr("SSL_CLIENT_CERT");
    k_peercert = oribi_fstr("puma.peercert");
    for (size_t i = 0; i < NMETHODS; i++)
        method_vals[i] = oribi_fstr(methods[i]);
    for (size_t i = 0; i < NCOMMON; i++) {
        char key[64];
        size_t len = strlen(common_fields[i]);
        common_lens[i] = (unsigned char)len;
        common_keys[i] = rb_interned_str(key, (long)field_key(key, common_fields[i], len));
        rb_gc_register_mark_object(common_keys[i]);
    }
}

/* The shared frozen value of a common method, or Qnil. */
static VALUE method_value(const char *m, size_t len)
{
    for (size_t i = 0; i < NMETHODS; i++)
        if (strlen(methods[i]) == len && memcmp(methods[i], m, len) == 0)
            return method_vals[i];
    return Qnil;
}

/* The env key for a header field; Qnil for a name that must not become one.
 * Names with '_' are dropped: "X_Forwarded_For" would otherwise clobber
 * "X-Forwarded-For" (CVE-2024-45614). */
static VALUE header_key(const char *name, size_t len)
{
    for (size_t i = 0; i < NCOMMON; i++)
        if (common_lens[i] == len && strncasecmp(common_fields[i], name, len) == 0)
            return common_keys[i];
    if (memchr(name, '_', len))
        return Qnil;
    if (len == 12 && strncasecmp(name, "content-type", 12) == 0)
        return k_content_type;
    if (len == 14 && strncasecmp(name, "content-length", 14) == 0)
        return k_content_length;
    if (len == 17 && strncasecmp(name, "transfer-encoding", 17) == 0)
        return Qnil; /* the app gets the decoded body and its CONTENT_LENGTH */
    if (len == 5 && strncasecmp(name, "proxy", 5) == 0)
        return Qnil; /* httpoxy: HTTP_PROXY is read as the outgoing proxy */
    char stack[256];
    char *key = len + 5 <= sizeof(stack) ? stack : ALLOC_N(char, len + 5);
    VALUE v = rb_interned_str(key, (long)field_key(key, name, len));
    if (key != stack)
        xfree(key);
    return v;
}

/* The conn's peer: its family tells a unix one (as the loop sets it for a
 * unix listener's) from an address, the socket's or a PROXY header's. */
static VALUE remote_addr(const struct oribi_conn *c)
{
    char ip[INET6_ADDRSTRLEN];
    if (c->peer.ss_family == AF_UNIX)
        return v_localhost_ip;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&c->peer;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    } else if (c->peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&c->peer;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], ip, sizeof(ip));
        else
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
    } else {
        return v_localhost_ip;
    }
    /* Interned: the same peer (a proxy, a load balancer) comes back again
     * and again, and an interned string is a lookup, not an allocation. */
    return rb_interned_str_cstr(ip);
}

void oribi_env_remote_addr_from(VALUE env, const struct oribi_request *r, const char *name, size_t len)
{
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct oribi_header *h = &r->headers[i];
        if (h->name_len != len || strncasecmp(h->name, name, len) != 0)
            continue;
        const char *v = h->value, *end = h->value + h->value_len;
        const char *comma = memchr(v, ',', h->value_len);
        if (comma)
            end = comma;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        unsigned char bin[16];
        size_t n = (size_t)(end - v);
        if (oribi_address_parse(v, n, ORIBI_PROXY_INET, bin) < 0 &&
            oribi_address_parse(v, n, ORIBI_PROXY_INET6, bin) < 0)
            return;
        rb_hash_aset(env, k_remote_addr, rb_interned_str(v, (long)n));
        return;
    }
}

/* What tells peers apart for REMOTE_ADDR: the family and the address. */
static void peer_key(unsigned char key[17], const struct oribi_conn *c)
{
    memset(key, 0, 17);
    if (c->peer.ss_family == AF_UNIX)
        return;
    key[0] = (unsigned char)c->peer.ss_family;
    if (c->peer.ss_family == AF_INET)
        memcpy(key + 1, &((const struct sockaddr_in *)&c->peer)->sin_addr, 4);
    else if (c->peer.ss_family == AF_INET6)
        memcpy(key + 1, &((const struct sockaddr_in6 *)&c->peer)->sin6_addr, 16);
}

/* SERVER_NAME and SERVER_PORT from a Host value: "name", "name:port",
 * "[v6]" or "[v6]:port". */
static void split_host(VALUE env, const char *h, size_t len)
{
    size_t name_end = len;
    const char *port = NULL;
    size_t port_len = 0;
    if (len && h[0] == '[') {
        const char *close = memchr(h, ']', len);
        if (close) {
            name_end = (size_t)(close - h) + 1;
            if (name_end < len && h[name_end] == ':') {
                port = h + name_end + 1;
                port_len = len - name_end - 1;
            }
        }
    } else {
        const char *colon = memchr(h, ':', len);
        if (colon) {
            name_end = (size_t)(colon - h);
            port = colon + 1;
            port_len = len - name_end - 1;
        }
    }
    rb_hash_aset(env, k_server_name, rb_interned_str(h, (long)name_end));
    rb_hash_aset(env, k_server_port, port_len ? rb_interned_str(port, (long)port_len) : v_port80);
}

struct pairs;
static void pairs_add(struct pairs *p, VALUE key, VALUE value);

/* A client certificate (mutual TLS): SSL_CLIENT_CERT, PEM as nginx and
 * Apache pass it, and puma.peercert, an OpenSSL::X509::Certificate as Puma
 * gives it (Ruby's openssl loaded when the first one comes). */
static void peer_cert(struct pairs *p, struct oribi_conn *c)
{
    size_t len;
    char *pem = oribi_tls_peer_pem(c, &len);
    if (!pem)
        return;
    VALUE text = rb_str_new(pem, (long)len);
    free(pem);
    static VALUE cCertificate = Qundef;
    if (cCertificate == Qundef) {
        rb_require("openssl");
        cCertificate = rb_path2class("OpenSSL::X509::Certificate");
        rb_gc_register_mark_object(cCertificate);
    }
    pairs_add(p, k_client_cert, text);
    pairs_add(p, k_peercert, rb_funcall(cCertificate, rb_intern("new"), 1, text));
}

/* Whether a Host value ends in a port: "name:port", "[v6]:port". */
static int host_names_port(const char *h, size_t len)
{
    const char *from = h;
    if (h[0] == '[') {
        from = memchr(h, ']', len);
        if (!from)
            return 0;
    }
    return memchr(from, ':', len - (size_t)(from - h)) != NULL;
}

/* The protocols of the Upgrade field(s), in order: "websocket", "h2c". */
static VALUE upgrade_protocols(const struct oribi_request *r)
{
    VALUE list = rb_ary_new();
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct oribi_header *h = &r->headers[i];
        if (h->name_len != 7 || strncasecmp(h->name, "upgrade", 7) != 0)
            continue;
        size_t j = 0;
        while (j < h->value_len) {
            while (j < h->value_len && (h->value[j] == ',' || h->value[j] == ' ' || h->value[j] == '\t'))
                j++;
            size_t start = j;
            while (j < h->value_len && h->value[j] != ',' && h->value[j] != ' ' && h->value[j] != '\t')
                j++;
            if (j > start)
                rb_ary_push(list, rb_str_new(h->value + start, (long)(j - start)));
        }
    }
    return list;
}

/* The pairs that are the same in every env of an exchange, hashed once:
 * rb_hash_dup copies the table with its stored hashes, so a request pays
 * only for the keys whose values are its own. Ruby hashes a String key
 * again on every insert, so the values that repeat from one request to the
 * next (the method, the peer, the host; tmpl_* below) are kept there too,
 * as the last request had them: only a request unlike the last updates
 * them, once. Only shared frozen values go in. */
static void build_template(struct oribi_env_ctx *ctx)
{
    VALUE t = rb_hash_new_capa(32); /* a copy keeps this capacity: room for the headers */
    VALUE same[] = {
        k_script_name,     v_empty,
        k_query_string,    v_empty,  /* replaced when there is a query */
        k_server_protocol, v_http11, /* replaced for HTTP/1.0 */
        k_server_software, v_software,
        k_rack_errors,     rb_stderr,
        k_url_scheme,      NIL_P(ctx->url_scheme) ? v_http : ctx->url_scheme,
        k_multithread,     ctx->multithread,
        k_multiprocess,    ctx->multiprocess,
        k_run_once,        Qfalse,
        k_hijack_p,        Qtrue,            /* rack.hijack and rack.early_hints are each request's own */
        oribi_key_input,   ctx->empty_input, /* replaced when there is a body */
        k_io_bound,        ctx->no_mark,     /* replaced with io_threads: Puma 8 always offers it */
    };
    rb_hash_bulk_insert((long)(sizeof(same) / sizeof(same[0])), same, t);
    ctx->tmpl = t;
    ctx->tmpl_errors = rb_stderr;
    ctx->t_method = Qundef;
    memset(ctx->t_peer, 0xff, sizeof(ctx->t_peer)); /* no family is 0xff */
    ctx->t_host_set = 0;
}

static void tmpl_method(struct oribi_env_ctx *ctx, VALUE method)
{
    if (ctx->t_method != method) {
        rb_hash_aset(ctx->tmpl, oribi_key_request_method, method);
        ctx->t_method = method;
    }
}

static void tmpl_peer(struct oribi_env_ctx *ctx, const struct oribi_conn *c)
{
    unsigned char key[sizeof(ctx->t_peer)];
    peer_key(key, c);
    if (memcmp(key, ctx->t_peer, sizeof(key)) != 0) {
        rb_hash_aset(ctx->tmpl, k_remote_addr, remote_addr(c));
        memcpy(ctx->t_peer, key, sizeof(key));
    }
}

/* SERVER_NAME and SERVER_PORT: from the Host, or the listener's address
 * when the request names none. */
static void tmpl_host(struct oribi_env_ctx *ctx, const struct oribi_request *r, int listener)
{
    int named = r->host && r->host_len;
    size_t len = named ? r->host_len : 0;
    if (ctx->t_host_set && ctx->t_host_listener == (named ? -1 : listener) && ctx->t_host_len == len &&
        (!named || memcmp(ctx->t_host, r->host, len) == 0))
        return;
    if (named) {
        split_host(ctx->tmpl, r->host, r->host_len);
    } else {
        rb_hash_aset(ctx->tmpl, k_server_name, ctx->listeners[listener].server_name);
        rb_hash_aset(ctx->tmpl, k_server_port, ctx->listeners[listener].server_port);
    }
    ctx->t_host_set = len <= sizeof(ctx->t_host);
    ctx->t_host_listener = named ? -1 : listener;
    ctx->t_host_len = len;
    if (named && ctx->t_host_set)
        memcpy(ctx->t_host, r->host, len);
}

/* Pairs gathered for one rb_hash_bulk_insert, which costs less per key
 * than rb_hash_aset. */
struct pairs {
    VALUE env;
    long n;
    int flushed; /* some went in already */
    VALUE kv[64];
};

static void pairs_flush(struct pairs *p)
{
    rb_hash_bulk_insert(p->n, p->kv, p->env);
    p->n = 0;
    p->flushed = 1;
}

static void pairs_add(struct pairs *p, VALUE key, VALUE value)
{
    if (p->n == (long)(sizeof(p->kv) / sizeof(p->kv[0])))
        pairs_flush(p);
    p->kv[p->n++] = key;
    p->kv[p->n++] = value;
}

/* The value already given to key in this env, or Qundef. Keys are interned,
 * so the same key is the same object. */
static VALUE pairs_get(const struct pairs *p, VALUE key)
{
    for (long i = 0; i < p->n; i += 2)
        if (p->kv[i] == key)
            return p->kv[i + 1];
    return p->flushed ? rb_hash_lookup2(p->env, key, Qundef) : Qundef;
}

/* HTTP_* (and CONTENT_*) pairs from the header fields. Names with the same
 * env key are the same name (names with '_' never get one). */
static void header_pairs(struct pairs *p, const struct oribi_request *r)
{
    for (size_t i = 0; i < r->num_headers; i++) {
        const struct oribi_header *h = &r->headers[i];
        VALUE key = header_key(h->name, h->name_len);
        if (NIL_P(key))
            continue;
        VALUE prev = pairs_get(p, key);
        if (prev == Qundef) {
            pairs_add(p, key, rb_str_new(h->value, (long)h->value_len));
        } else if (key != k_content_length) { /* duplicates were checked equal */
            /* RFC 9110 5.3: repeated fields combine with commas; cookies with
             * "; " (RFC 6265 5.4). */
            int cookie = h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0;
            rb_str_cat(prev, cookie ? "; " : ", ", 2);
            rb_str_cat(prev, h->value, (long)h->value_len);
        }
    }
}

VALUE oribi_env_build(struct oribi_env_ctx *ctx, struct oribi_conn *c, const struct oribi_env_own *own)
{
    const struct oribi_request *r = &c->req;
    if (ctx->tmpl_errors != rb_stderr) /* $stderr was replaced: rack.errors follows */
        build_template(ctx);
    VALUE method = method_value(r->method, r->method_len);
    if (!NIL_P(method))
        tmpl_method(ctx, method);
    tmpl_peer(ctx, c);
    tmpl_host(ctx, r, c->listener);

    struct pairs p = {.env = rb_hash_dup(ctx->tmpl)};
    const char *q = memchr(r->path, '?', r->path_len);
    size_t plen = q ? (size_t)(q - r->path) : r->path_len;
    pairs_add(&p, k_path_info, rb_str_new(r->path, (long)plen));
    pairs_add(&p, k_request_uri, rb_str_new(r->target, (long)r->target_len));
    pairs_add(&p, k_response_finished, rb_ary_new());
    if (NIL_P(method))
        pairs_add(&p, oribi_key_request_method, rb_str_new(r->method, (long)r->method_len));
    if (own->input != ctx->empty_input)
        pairs_add(&p, oribi_key_input, own->input);
    int tls = ctx->listeners[c->listener].tls;
    pairs_add(&p, k_hijack, own->hijack);
    if (q)
        pairs_add(&p, k_query_string, rb_str_new(q + 1, (long)(r->path_len - plen - 1)));
    if (r->minor_version != 1)
        pairs_add(&p, k_server_protocol, v_http10);
    else if (ctx->early_hints) /* no 1xx for HTTP/1.0 (RFC 9110 15.2) */
        pairs_add(&p, k_early_hints, own->early_hints);
    if (!NIL_P(own->io_bound))
        pairs_add(&p, k_io_bound, own->io_bound);
    if (tls) {
        pairs_add(&p, k_url_scheme, v_https);
        pairs_add(&p, k_https, v_on);
        if (r->host && r->host_len && !host_names_port(r->host, r->host_len))
            pairs_add(&p, k_server_port, v_port443);
        peer_cert(&p, c);
    }
    header_pairs(&p, r);
    pairs_flush(&p);

    VALUE env = p.env;
    if (r->chunked) {
        char cl[24];
        snprintf(cl, sizeof(cl), "%lld", (long long)c->body_total);
        rb_hash_aset(env, k_content_length, rb_str_new_cstr(cl));
    }
    /* absolute-form: its authority wins */
    if (r->host && r->target[0] != '/' && r->target[0] != '*')
        rb_hash_aset(env, k_http_host, rb_str_new(r->host, (long)r->host_len));
    if (r->upgrade && r->minor_version == 1)
        rb_hash_aset(env, k_protocol, upgrade_protocols(r));
    return env;
}
