/*
 * Oribi::Engine: the Ruby face of a worker's C loop. next_request waits
 * without the GVL until the loop has a complete request and returns its
 * Rack env; respond writes the app's response (one sendmsg where the
 * socket allows) and hands the connection back to the loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <ruby.h>
#include <ruby/thread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "loop.h"
#include "oribi.h"
#include "response.h"

#define COALESCE_MAX 32768 /* streamed chunks are gathered up to this before a write */

struct engine {
    struct oribi_loop loop;
    int ready;
    struct oribi_env_ctx ctx;
    struct oribi_env_listener listeners[ORIBI_MAX_LISTENERS];
    VALUE empty_input;
    VALUE spilled_input; /* the tmpfile IO of the request in the app, closed after it */
    VALUE tmpdir;
    char *out;           /* response head and coalesced body bytes not yet written */
    size_t out_len, out_cap;
};

static VALUE cEngine, cStringIO, eClientGone;
static ID id_new, id_for_fd, id_each, id_close, id_to_ary, id_call, id_rewind, id_write;

static void engine_mark(void *p)
{
    struct engine *e = p;
    for (int i = 0; i < e->loop.nlisteners; i++) {
        rb_gc_mark(e->listeners[i].server_name);
        rb_gc_mark(e->listeners[i].server_port);
    }
    rb_gc_mark(e->empty_input);
    rb_gc_mark(e->spilled_input);
    rb_gc_mark(e->tmpdir);
}

static void engine_free(void *p)
{
    struct engine *e = p;
    if (e->ready)
        oribi_loop_free(&e->loop);
    free(e->out);
    xfree(e);
}

static const rb_data_type_t engine_type = {
    "Oribi::Engine", {engine_mark, engine_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE engine_alloc(VALUE klass)
{
    struct engine *e = ZALLOC(struct engine);
    e->empty_input = e->spilled_input = e->tmpdir = Qnil;
    return TypedData_Wrap_Struct(klass, &engine_type, e);
}

static struct engine *get_engine(VALUE self)
{
    struct engine *e = rb_check_typeddata(self, &engine_type);
    if (!e->ready)
        rb_raise(rb_eIOError, "engine closed");
    return e;
}

static int64_t opt_ms(VALUE opts, const char *name, int64_t dflt)
{
    VALUE v = rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qundef);
    if (v == Qundef || NIL_P(v))
        return dflt;
    double s = NUM2DBL(v);
    if (s <= 0)
        rb_raise(rb_eArgError, "%s must be positive", name);
    return (int64_t)(s * 1000);
}

static int64_t opt_int(VALUE opts, const char *name, int64_t dflt)
{
    VALUE v = rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qundef);
    if (v == Qundef || NIL_P(v))
        return dflt;
    int64_t n = NUM2LL(v);
    if (n < 0)
        rb_raise(rb_eArgError, "%s must not be negative", name);
    return n;
}

/* What the env says when a request names no host: the listener's own address. */
static void describe_listener(struct oribi_env_listener *l, struct oribi_listener *ol, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[64] = "localhost", port[8] = "80";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        rb_sys_fail("getsockname");
    ol->fd = fd;
    ol->is_unix = l->is_unix = ss.ss_family == AF_UNIX;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (a->sin_addr.s_addr != htonl(INADDR_ANY))
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        snprintf(port, sizeof(port), "%u", ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (!IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr)) {
            host[0] = '[';
            inet_ntop(AF_INET6, &a->sin6_addr, host + 1, sizeof(host) - 2);
            strcat(host, "]");
        }
        snprintf(port, sizeof(port), "%u", ntohs(a->sin6_port));
    }
    l->server_name = rb_obj_freeze(rb_str_new_cstr(host));
    l->server_port = rb_obj_freeze(rb_str_new_cstr(port));
}

/* Engine.new(listener_fds, options) — options are documented in docs/CONFIGURATION.md */
static VALUE engine_init(VALUE self, VALUE fds, VALUE opts)
{
    struct engine *e = rb_check_typeddata(self, &engine_type);
    struct oribi_options o;
    struct oribi_listener ls[ORIBI_MAX_LISTENERS];
    Check_Type(fds, T_ARRAY);
    Check_Type(opts, T_HASH);
    long n = RARRAY_LEN(fds);
    if (n < 1 || n > ORIBI_MAX_LISTENERS)
        rb_raise(rb_eArgError, "1 to %d listeners", ORIBI_MAX_LISTENERS);

    memset(&o, 0, sizeof(o));
    o.limits.max_request_line = (size_t)opt_int(opts, "max_request_line", ORIBI_DEFAULT_MAX_REQUEST_LINE);
    o.limits.max_header_bytes = (size_t)opt_int(opts, "max_header_bytes", ORIBI_DEFAULT_MAX_HEADER_BYTES);
    o.limits.max_headers = (size_t)opt_int(opts, "max_headers", ORIBI_DEFAULT_MAX_HEADERS);
    if (o.limits.max_headers < 1 || o.limits.max_request_line < 16 || o.limits.max_header_bytes < 16)
        rb_raise(rb_eArgError, "header limits too small");
    o.keepalive = RTEST(rb_hash_lookup2(opts, ID2SYM(rb_intern("keepalive")), Qtrue));
    o.keepalive_requests = (unsigned)opt_int(opts, "keepalive_requests", ORIBI_DEFAULT_KEEPALIVE_REQUESTS);
    o.keepalive_timeout_ms = opt_ms(opts, "keepalive_timeout", ORIBI_DEFAULT_KEEPALIVE_TIMEOUT_MS);
    o.header_timeout_ms = opt_ms(opts, "header_timeout", ORIBI_DEFAULT_HEADER_TIMEOUT_MS);
    o.body_timeout_ms = opt_ms(opts, "body_timeout", ORIBI_DEFAULT_BODY_TIMEOUT_MS);
    o.write_timeout_ms = opt_ms(opts, "write_timeout", ORIBI_DEFAULT_WRITE_TIMEOUT_MS);
    o.max_body = opt_int(opts, "max_body", 0);
    o.body_buffer = (size_t)opt_int(opts, "body_buffer", ORIBI_DEFAULT_BODY_BUFFER);
    o.max_connections = (unsigned)opt_int(opts, "max_connections", ORIBI_DEFAULT_MAX_CONNECTIONS);
    if (o.max_connections < 1)
        rb_raise(rb_eArgError, "max_connections must be at least 1");
    VALUE tmpdir = rb_hash_lookup2(opts, ID2SYM(rb_intern("tmpdir")), Qnil);
    e->tmpdir = rb_obj_freeze(rb_str_new_cstr(NIL_P(tmpdir) ? (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp")
                                                           : StringValueCStr(tmpdir)));
    o.tmpdir = RSTRING_PTR(e->tmpdir);

    for (long i = 0; i < n; i++)
        describe_listener(&e->listeners[i], &ls[i], NUM2INT(rb_ary_entry(fds, i)));
    if (oribi_loop_init(&e->loop, &o, ls, (int)n) < 0)
        rb_sys_fail("oribi loop");
    e->ready = 1;
    e->ctx.listeners = e->listeners;
    e->ctx.multiprocess = RTEST(rb_hash_lookup(opts, ID2SYM(rb_intern("multiprocess")))) ? Qtrue : Qfalse;
    e->ctx.multithread = Qfalse;
    e->empty_input = rb_funcall(cStringIO, id_new, 1, rb_obj_freeze(rb_str_new(NULL, 0)));
    return self;
}

static void *run_nogvl(void *p)
{
    return (void *)(intptr_t)oribi_loop_run(p, 1);
}

static void wake_ubf(void *p)
{
    oribi_loop_wake(p);
}

static VALUE request_input(struct engine *e, struct oribi_conn *c)
{
    int fd = oribi_conn_take_body_fd(c);
    if (fd >= 0) {
        VALUE io = rb_funcall(rb_cFile, id_for_fd, 2, INT2FIX(fd), rb_str_new_cstr("rb"));
        e->spilled_input = io;
        return io;
    }
    if (c->body_mem)
        return rb_funcall(cStringIO, id_new, 1, rb_str_new(c->buf + c->head_len, (long)c->body_mem));
    rb_funcall(e->empty_input, id_rewind, 0);
    return e->empty_input;
}

/* Returns the next request's env, or nil once a stopping loop is drained. */
static VALUE engine_next_request(VALUE self)
{
    struct engine *e = get_engine(self);
    for (;;) {
        struct oribi_conn *c = oribi_loop_take(&e->loop);
        if (c) {
            VALUE token = ULL2NUM(oribi_conn_token(c));
            return oribi_env_build(&e->ctx, c, request_input(e, c), token);
        }
        /* Under load the next request is often already there: look without
         * giving up the GVL, which costs a futex handoff each way. */
        intptr_t r = oribi_loop_run(&e->loop, 0);
        if (r == LOOP_READY)
            continue;
        if (r == LOOP_IDLE)
            r = (intptr_t)rb_thread_call_without_gvl(run_nogvl, &e->loop, wake_ubf, &e->loop);
        if (r == LOOP_STOPPED)
            return Qnil;
        if (r == LOOP_INTERRUPTED)
            rb_thread_check_ints(); /* trap handlers run here (they may call #stop) */
    }
}

/* ---- responses ---- */

enum { BODY_NONE, BODY_ARRAY, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };

struct resp {
    struct engine *e;
    struct oribi_conn *c;
    VALUE body;
    VALUE to_close;     /* what gets #close: nil once to_ary took the body over */
    VALUE headers;
    int status;
    int flushed;        /* bytes of this response went out */
    int mode;
    int keepalive;
    int head_only;
    int gone;          /* the peer went away: stop producing */
    int64_t app_length; /* content-length the app gave, -1 none */
    int64_t sent;       /* body bytes sent (BODY_LENGTH) */
};

static void out_reserve(struct engine *e, size_t n)
{
    if (e->out_cap - e->out_len >= n)
        return;
    size_t cap = e->out_cap ? e->out_cap : 8192;
    while (cap - e->out_len < n)
        cap *= 2;
    char *p = realloc(e->out, cap);
    if (!p)
        rb_raise(rb_eNoMemError, "response buffer");
    e->out = p;
    e->out_cap = cap;
}

static void out_cat(struct engine *e, const char *p, size_t n)
{
    out_reserve(e, n);
    memcpy(e->out + e->out_len, p, n);
    e->out_len += n;
}

static void *wait_nogvl(void *p)
{
    struct resp *r = p;
    return (void *)(intptr_t)oribi_conn_wait_writable(r->c, r->e->loop.opt.write_timeout_ms);
}

/* Writes what is gathered plus extra; waits (without the GVL) while the
 * client is slower than the body is produced. */
static void out_flush(struct resp *r, const struct iovec *extra, int nextra)
{
    struct iovec iov[1 + 1024];
    int n = 0;
    if (r->gone)
        return;
    if (r->e->out_len)
        iov[n++] = (struct iovec){r->e->out, r->e->out_len};
    for (int i = 0; i < nextra && n < (int)(sizeof(iov) / sizeof(iov[0])); i++)
        iov[n++] = extra[i];
    int w = n ? oribi_conn_write(r->c, iov, n) : 0;
    r->e->out_len = 0;
    r->flushed = 1;
    while (w == 1) {
        if ((intptr_t)rb_thread_call_without_gvl(wait_nogvl, r, RUBY_UBF_IO, NULL) < 0) {
            w = -1;
            break;
        }
        w = oribi_conn_flush(r->c);
    }
    if (w < 0)
        r->gone = 1;
}

struct head_ctx {
    struct resp *r;
    int connection_close;
};

static void drop_header(VALUE key, const char *why)
{
    VALUE msg = rb_sprintf("oribi: dropped response header %+"PRIsVALUE": %s\n", key, why);
    rb_funcall(rb_stderr, id_write, 1, msg);
}

static int parse_length(const char *p, long n, int64_t *out)
{
    int64_t v = 0;
    if (n < 1 || n > 18)
        return 0;
    for (long i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static void head_field(struct engine *e, VALUE key, VALUE val)
{
    if (!RB_TYPE_P(val, T_STRING))
        return drop_header(key, "value is not a String");
    if (!oribi_field_value_ok(RSTRING_PTR(val), RSTRING_LEN(val)))
        return drop_header(key, "value has CR, LF, NUL or another control byte");
    out_reserve(e, (size_t)(RSTRING_LEN(key) + RSTRING_LEN(val) + 4));
    out_cat(e, RSTRING_PTR(key), (size_t)RSTRING_LEN(key));
    out_cat(e, ": ", 2);
    out_cat(e, RSTRING_PTR(val), (size_t)RSTRING_LEN(val));
    out_cat(e, "\r\n", 2);
}

/* "close" as one of the comma-separated tokens of a Connection value */
static int has_close_token(const char *p, long n)
{
    long i = 0;
    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == ','))
            i++;
        long start = i;
        while (i < n && p[i] != ',' && p[i] != ' ' && p[i] != '\t')
            i++;
        if (i - start == 5 && strncasecmp(p + start, "close", 5) == 0)
            return 1;
    }
    return 0;
}

static int head_each(VALUE key, VALUE val, VALUE arg)
{
    struct head_ctx *h = (struct head_ctx *)arg;
    struct resp *r = h->r;
    if (!RB_TYPE_P(key, T_STRING))
        return ST_CONTINUE;
    const char *k = RSTRING_PTR(key);
    long klen = RSTRING_LEN(key);
    if (!oribi_field_name_ok(k, (size_t)klen)) {
        drop_header(key, "not a valid field name");
        return ST_CONTINUE;
    }
    if (klen > 5 && strncmp(k, "rack.", 5) == 0)
        return ST_CONTINUE;
    switch (oribi_hop_by_hop(k, (size_t)klen)) {
    case ORIBI_HOP_CONNECTION:
        /* The server owns the connection; the app may only ask to close it. */
        if (RB_TYPE_P(val, T_STRING) && has_close_token(RSTRING_PTR(val), RSTRING_LEN(val)))
            h->connection_close = 1;
        return ST_CONTINUE;
    case ORIBI_HOP_CONTENT_LENGTH:
        if (!RB_TYPE_P(val, T_STRING) || !parse_length(RSTRING_PTR(val), RSTRING_LEN(val), &r->app_length))
            drop_header(key, "not a valid length");
        return ST_CONTINUE;
    case ORIBI_HOP_TRANSFER_ENCODING:
    case ORIBI_HOP_OTHER:
        return ST_CONTINUE; /* framing is the server's */
    }
    if (RB_TYPE_P(val, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(val); i++)
            head_field(r->e, key, RARRAY_AREF(val, i));
    } else {
        head_field(r->e, key, val);
    }
    return ST_CONTINUE;
}

static void head_line(struct engine *e, const char *s)
{
    out_cat(e, s, strlen(s));
}

static VALUE chunk_each(RB_BLOCK_CALL_FUNC_ARGLIST(chunk, arg))
{
    struct resp *r = (struct resp *)arg;
    struct engine *e = r->e;
    if (!RB_TYPE_P(chunk, T_STRING))
        rb_raise(rb_eTypeError, "body yielded a non-String (%"PRIsVALUE")", rb_obj_class(chunk));
    size_t n = (size_t)RSTRING_LEN(chunk);
    const char *p = RSTRING_PTR(chunk);
    if (r->gone || n == 0) {
        if (r->gone)
            rb_iter_break();
        return Qnil;
    }
    if (r->mode == BODY_LENGTH) {
        if (r->sent + (int64_t)n > r->app_length) /* never send more than announced */
            n = (size_t)(r->app_length - r->sent);
        r->sent += (int64_t)n;
    }
    if (r->mode == BODY_CHUNKED) {
        char pre[20];
        size_t pl = oribi_chunk_prefix(pre, n);
        out_cat(e, pre, pl);
    }
    if (n >= 8192) {
        struct iovec iov[2] = {{(void *)p, n}, {"\r\n", 2}};
        out_flush(r, iov, r->mode == BODY_CHUNKED ? 2 : 1);
    } else {
        out_cat(e, p, n);
        if (r->mode == BODY_CHUNKED)
            out_cat(e, "\r\n", 2);
        if (e->out_len >= COALESCE_MAX)
            out_flush(r, NULL, 0);
    }
    RB_GC_GUARD(chunk);
    return Qnil;
}

static VALUE write_body(VALUE arg)
{
    struct resp *r = (struct resp *)arg;
    struct engine *e = r->e;
    VALUE body = r->body;

    if (r->mode == BODY_NONE) {
        out_flush(r, NULL, 0);
        return Qnil;
    }
    if (r->mode == BODY_ARRAY) {
        long n = RARRAY_LEN(body);
        struct iovec iov[1024];
        int k = 0;
        for (long i = 0; i < n; i++) {
            VALUE s = RARRAY_AREF(body, i);
            iov[k++] = (struct iovec){RSTRING_PTR(s), (size_t)RSTRING_LEN(s)};
            if (k == 1024) {
                out_flush(r, iov, k);
                k = 0;
            }
        }
        out_flush(r, iov, k);
        return Qnil;
    }
    rb_block_call(body, id_each, 0, NULL, chunk_each, (VALUE)r);
    if (r->mode == BODY_CHUNKED)
        out_cat(e, "0\r\n\r\n", 5);
    if (r->mode == BODY_LENGTH && r->sent != r->app_length)
        r->keepalive = 0; /* the body fell short of its content-length: framing is lost */
    out_flush(r, NULL, 0);
    return Qnil;
}

static VALUE close_body(VALUE arg)
{
    struct resp *r = (struct resp *)arg;
    if (!NIL_P(r->to_close) && rb_respond_to(r->to_close, id_close))
        rb_funcall(r->to_close, id_close, 0);
    return Qnil;
}

static void cat_length(struct engine *e, int64_t n)
{
    char cl[40];
    out_cat(e, cl, (size_t)snprintf(cl, sizeof(cl), "content-length: %lld\r\n", (long long)n));
}

/* Chooses the framing: our own length for arrays, the app's for bodies
 * that announce one, chunked for HTTP/1.1, close-delimited for HTTP/1.0. */
static void frame_body(struct resp *r)
{
    struct engine *e = r->e;
    int bodyless = r->status < 200 || r->status == 204 || r->status == 304;
    if (bodyless || r->head_only) {
        r->mode = BODY_NONE;
        /* HEAD and 304 may say the length a GET would have had. */
        if (r->app_length >= 0 && r->status != 204 && r->status >= 200)
            cat_length(e, r->app_length);
        return;
    }
    VALUE body = r->body;
    if (!RB_TYPE_P(body, T_ARRAY) && rb_respond_to(body, id_to_ary)) {
        VALUE ary = rb_check_array_type(body);
        if (!NIL_P(ary)) {
            r->to_close = Qnil; /* Rack 3: to_ary closes the body itself */
            r->body = body = ary;
        }
    }
    if (RB_TYPE_P(body, T_ARRAY)) {
        int64_t total = 0;
        for (long i = 0; i < RARRAY_LEN(body); i++) {
            VALUE part = RARRAY_AREF(body, i);
            if (!RB_TYPE_P(part, T_STRING))
                rb_raise(rb_eTypeError, "body element is not a String");
            total += RSTRING_LEN(part);
        }
        r->mode = BODY_ARRAY;
        cat_length(e, total);
    } else if (!rb_respond_to(body, id_each)) {
        rb_raise(rb_eTypeError, "body responds to neither each nor to_ary");
    } else if (r->app_length >= 0) {
        r->mode = BODY_LENGTH;
        cat_length(e, r->app_length);
    } else if (r->c->req.minor_version == 1) {
        r->mode = BODY_CHUNKED;
        head_line(e, "transfer-encoding: chunked\r\n");
    } else {
        r->mode = BODY_CLOSE; /* HTTP/1.0 and no length: the close ends the body */
        r->keepalive = 0;
    }
}

static VALUE respond_inner(VALUE arg)
{
    struct resp *r = (struct resp *)arg;
    struct engine *e = r->e;
    size_t n;
    const char *s = oribi_status_line(r->status, &n);
    out_cat(e, s, n);
    s = oribi_date_header(time(NULL), &n);
    out_cat(e, s, n);
    struct head_ctx h = {r, 0};
    if (RB_TYPE_P(r->headers, T_HASH))
        rb_hash_foreach(r->headers, head_each, (VALUE)&h);
    if (h.connection_close)
        r->keepalive = 0;
    frame_body(r);
    if (!r->keepalive)
        head_line(e, "connection: close\r\n");
    else if (r->c->req.minor_version == 0)
        head_line(e, "connection: keep-alive\r\n");
    head_line(e, "\r\n");
    return write_body(arg);
}

static VALUE respond_all(VALUE arg)
{
    return rb_ensure(respond_inner, arg, close_body, arg);
}

/* engine.respond(env, status, headers, body) → true when the connection
 * stays open. The body is always closed; when the app's response cannot be
 * sent, the client gets a 500 if nothing went out yet, else a close, and
 * the exception is raised for the caller to log. */
static VALUE engine_respond(VALUE self, VALUE env, VALUE status, VALUE headers, VALUE body)
{
    struct engine *e = get_engine(self);
    VALUE token = rb_hash_lookup(env, oribi_key_conn);
    struct oribi_conn *c = NIL_P(token) ? NULL : oribi_loop_conn(&e->loop, NUM2ULL(token));
    if (!c || c->state != CONN_APP)
        rb_raise(rb_eArgError, "no request in progress for this env");

    struct resp r = {.e = e, .c = c, .body = body, .to_close = body, .headers = headers,
                     .app_length = -1, .keepalive = c->req.keepalive && !e->loop.stopping};
    r.status = FIXNUM_P(status) ? FIX2INT(status) : 0;
    r.head_only = c->req.method_len == 4 && memcmp(c->req.method, "HEAD", 4) == 0;
    e->out_len = 0;
    int state = 0;
    if (r.status < 100 || r.status > 999) {
        close_body((VALUE)&r);
        r.status = 500;
        state = -1;
    } else {
        rb_protect(respond_all, (VALUE)&r, &state);
    }
    if (!NIL_P(e->spilled_input)) {
        VALUE io = e->spilled_input;
        e->spilled_input = Qnil;
        rb_io_close(io);
    }
    if (state) {
        r.keepalive = 0;
        if (!r.flushed && !r.gone) {
            char out[512];
            size_t n = oribi_error_response(out, sizeof(out), 500, time(NULL), 0);
            struct iovec iov = {out, n};
            if (oribi_conn_write(c, &iov, 1) < 0)
                r.gone = 1;
        }
    }
    if (r.gone)
        r.keepalive = 0;
    oribi_loop_finish(&e->loop, c, r.keepalive);
    if (state > 0)
        rb_jump_tag(state);
    if (state < 0)
        rb_raise(rb_eArgError, "status is not an Integer in 100..999: %+"PRIsVALUE, status);
    return r.keepalive ? Qtrue : Qfalse;
}

/* engine.stop(drain_backlog = true): graceful drain; next_request returns
 * nil once in-flight requests are done. Safe from a trap handler. */
static VALUE engine_stop(int argc, VALUE *argv, VALUE self)
{
    struct engine *e = get_engine(self);
    VALUE drain;
    rb_scan_args(argc, argv, "01", &drain);
    oribi_loop_stop(&e->loop, argc == 0 || RTEST(drain));
    oribi_loop_wake(&e->loop);
    return Qnil;
}

static VALUE engine_stats(VALUE self)
{
    struct engine *e = get_engine(self);
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("requests")), ULL2NUM(e->loop.requests));
    rb_hash_aset(h, ID2SYM(rb_intern("rejected")), ULL2NUM(e->loop.rejected));
    rb_hash_aset(h, ID2SYM(rb_intern("connections")), UINT2NUM(e->loop.nconns));
    return h;
}

static VALUE engine_close(VALUE self)
{
    struct engine *e = rb_check_typeddata(self, &engine_type);
    if (e->ready) {
        oribi_loop_free(&e->loop);
        e->ready = 0;
    }
    return Qnil;
}

void Init_oribi_engine(VALUE mOribi)
{
    rb_require("stringio");
    cStringIO = rb_const_get(rb_cObject, rb_intern("StringIO"));
    rb_gc_register_mark_object(cStringIO);
    id_new = rb_intern("new");
    id_for_fd = rb_intern("for_fd");
    id_each = rb_intern("each");
    id_close = rb_intern("close");
    id_to_ary = rb_intern("to_ary");
    id_call = rb_intern("call");
    id_rewind = rb_intern("rewind");
    id_write = rb_intern("write");
    oribi_env_init();

    cEngine = rb_define_class_under(mOribi, "Engine", rb_cObject);
    rb_define_alloc_func(cEngine, engine_alloc);
    rb_define_method(cEngine, "initialize", engine_init, 2);
    rb_define_method(cEngine, "next_request", engine_next_request, 0);
    rb_define_method(cEngine, "respond", engine_respond, 4);
    rb_define_method(cEngine, "stop", engine_stop, -1);
    rb_define_method(cEngine, "stats", engine_stats, 0);
    rb_define_method(cEngine, "close", engine_close, 0);
    rb_define_const(cEngine, "PARSER_SIMD", Qnil);
    (void)eClientGone;
}
