/*
 * Oribi::Engine: the Ruby face of a worker's C loop. next_request waits
 * without the GVL until the loop has a complete request (and, with
 * threads, a free exchange) and returns its Rack env; respond has the response
 * written (rack_response.c), hands the connection back to the loop and runs
 * rack.response_finished.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/thread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ruby/engine.h"
#include "ruby/hijack.h"
#include "ruby/oribi.h"
#include "ruby/rack_response.h"
#include "ruby/stream.h"
#include "ruby/tls_context.h"
#include "loop/body.h"
#include "loop/log.h"
#include "http/proxy_protocol.h"
#include "http/queue_time.h"
#include "http/response.h"

static VALUE cEngine, cStringIO, cHijack, cEarlyHints, cIoBound, empty_input, no_mark, k_response_finished, k_hijack,
    mGC, minor_gc_opts;
static ID id_new, id_for_fd, id_call, id_error, id_start;

/* oob_gc's collection: a minor GC swept at once. It takes the garbage of
 * the last requests (what they allocated and dropped is young), which is
 * what a GC in the next request would have collected, at a fraction of a
 * full GC's cost; Ruby still runs major GCs when the old generation grows. */
static void oob_gc(void)
{
    rb_funcallv_kw(mGC, id_start, 1, &minor_gc_opts, RB_PASS_KEYWORDS);
}

static void exchange_mark(struct oribi_exchange *x)
{
    rb_gc_mark(x->env);
    rb_gc_mark(x->io);
    rb_gc_mark(x->stream);
    rb_gc_mark(x->spilled_input);
    rb_gc_mark(x->self);
    for (int k = 0; k < ORIBI_TICKETS; k++)
        rb_gc_mark(x->tickets[k]);
    rb_gc_mark(x->ctx.tmpl);
}

static void engine_mark(void *p)
{
    struct oribi_engine *e = p;
    /* Every slot, not up to loop.nlisteners and nexchanges: Engine.new
     * sets those only once it made the slots' objects, and an object held
     * only here is swept by any allocation in between (the next slot's).
     * A slot not filled in yet is 0, Qfalse, which rb_gc_mark skips. */
    for (int i = 0; i < ORIBI_MAX_LISTENERS; i++) {
        rb_gc_mark(e->listeners[i].server_name);
        rb_gc_mark(e->listeners[i].server_port);
    }
    rb_gc_mark(e->tmpdir);
    rb_gc_mark(e->addr_header);
    rb_gc_mark(e->url_scheme);
    rb_gc_mark(e->tls_contexts);
    rb_gc_mark(e->dispatcher);
    rb_gc_mark(e->scoreboard);
    for (int i = 0; i < e->exchanges_len; i++)
        exchange_mark(&e->exchanges[i]);
    for (int i = 0; i < e->nslots; i++)
        exchange_mark(e->slots[i]);
}

static void engine_free(void *p)
{
    struct oribi_engine *e = p;
    if (e->ready)
        oribi_loop_free(&e->loop);
    for (int i = 0; i < e->exchanges_len; i++)
        free(e->exchanges[i].out);
    xfree(e->exchanges);
    xfree(e->free_ix);
    for (int i = 0; i < e->nslots; i++) {
        free(e->slots[i]->out);
        xfree(e->slots[i]);
    }
    xfree(e->slots);
    xfree(e->free_slots);
    oribi_handbacks_free(&e->hb);
    xfree(e);
}

static const rb_data_type_t engine_type = {
    "Oribi::Engine", {engine_mark, engine_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE engine_alloc(VALUE klass)
{
    struct oribi_engine *e = ZALLOC(struct oribi_engine);
    e->tmpdir = e->dispatcher = e->scoreboard = e->addr_header = e->url_scheme = e->tls_contexts = Qnil;
    e->multiprocess = e->multithread = Qfalse;
    return TypedData_Wrap_Struct(klass, &engine_type, e);
}

/* ---- exchanges: what an env callable or a stream holds on to ---- */

/* What every exchange has, a pool's or a stream slot's. */
static void exchange_base(VALUE engine, struct oribi_engine *e, struct oribi_exchange *x)
{
    x->engine = e;
    x->open = &e->ready;
    x->hb = &e->hb;
    x->opt = oribi_loop_options(&e->loop);
    x->env = x->io = x->stream = x->spilled_input = Qnil;
    for (int k = 0; k < ORIBI_TICKETS; k++)
        x->tickets[k] = Qnil;
    x->ctx.tmpl = x->ctx.tmpl_errors = Qnil;
    x->score = e->score;
    x->self = oribi_exchange_wrap(engine, x);
}

static void exchange_init(VALUE engine, struct oribi_engine *e, struct oribi_exchange *x)
{
    exchange_base(engine, e, x);
    x->ctx.listeners = e->listeners;
    x->ctx.multiprocess = e->multiprocess;
    x->ctx.multithread = e->multithread;
    /* Off unless configured: nginx before 1.29 takes a 103 for the final
     * response, and Varnish answers 503 (docs/DEPLOYMENT.md). */
    x->ctx.early_hints = e->early_hints;
    x->ctx.empty_input = empty_input;
    x->ctx.no_mark = no_mark;
    x->ctx.url_scheme = e->url_scheme;
}

struct oribi_engine *oribi_engine_get(VALUE self)
{
    struct oribi_engine *e = rb_check_typeddata(self, &engine_type);
    if (!e->ready)
        rb_raise(rb_eIOError, "engine closed");
    return e;
}

/* Engine options come from Config (Config::ENGINE), which has the defaults
 * and reports bad values by name; the engine has no fallback of its own.
 * What is checked here is what the loop's memory depends on: types, and
 * ranges that keep casts and allocations sound. */
static VALUE opt_get(VALUE opts, const char *name)
{
    VALUE v = rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qundef);
    if (v == Qundef)
        rb_raise(rb_eArgError, "engine option %s is missing", name);
    return v;
}

static int64_t opt_int(VALUE opts, const char *name, int64_t min, int64_t max)
{
    VALUE v = opt_get(opts, name);
    if (!RB_INTEGER_TYPE_P(v))
        rb_raise(rb_eArgError, "engine option %s must be an Integer", name);
    if (RTEST(rb_funcall(v, '<', 1, LL2NUM(min))) || RTEST(rb_funcall(v, '>', 1, LL2NUM(max))))
        rb_raise(rb_eArgError, "engine option %s must be in %lld..%lld", name, (long long)min, (long long)max);
    return NUM2LL(v);
}

/* The engine's integer options and their bounds, one row each: what keeps
 * its casts and allocations sound. Engine.new checks each value against
 * its row; Engine::BOUNDS gives the rows to lib/oribi/options.rb, whose
 * checks tell the user first. */
static const struct bound {
    const char *name;
    int64_t min, max;
} BOUNDS[] = {
    {"max_request_line", 16, INT64_MAX}, /* the parser needs room for a request line and one header */
    {"max_header_bytes", 16, INT64_MAX},
    {"max_headers", 1, INT64_MAX},
    {"keepalive_requests", 0, UINT32_MAX},
    {"max_body", 0, INT64_MAX},
    {"body_buffer", 0, INT64_MAX},
    {"max_connections", 1, UINT32_MAX},
    {"max_write_backlog", 0, INT64_MAX},
    {"max_response_spool", 0, INT64_MAX},
    {"max_worker_spool", 0, INT64_MAX},
    {"min_body_rate", 0, UINT32_MAX},
    {"busy_poll", 0, 1000},
    {"oob_gc", 0, INT64_MAX},
    {"threads", 1, ORIBI_MAX_THREADS},
    {"io_threads", 0, ORIBI_MAX_THREADS - 1}, /* and threads + io_threads at most ORIBI_MAX_THREADS */
    {"fibers", 0, ORIBI_MAX_FIBERS},
    {"max_streams", 0, ORIBI_MAX_STREAMS},
};

static int64_t opt_bounded(VALUE opts, const char *name)
{
    for (size_t i = 0; i < sizeof(BOUNDS) / sizeof(BOUNDS[0]); i++)
        if (strcmp(BOUNDS[i].name, name) == 0)
            return opt_int(opts, name, BOUNDS[i].min, BOUNDS[i].max);
    rb_raise(rb_eArgError, "engine option %s has no bounds", name); /* a row missing above */
}

/* The Config options Engine.new reads besides those with bounds: with
 * them, Engine::OPTIONS, which Config#engine_options passes (trusted
 * proxies, multiprocess and started_ms it works out itself). */
static const char *const OTHERS[] = {"keepalive",    "keepalive_timeout",  "header_timeout",
                                     "body_timeout", "write_timeout",      "tmpdir",
                                     "early_hints",  "remote_addr_header", "url_scheme"};

static VALUE options_list(void)
{
    VALUE a = rb_ary_new();
    for (size_t i = 0; i < sizeof(BOUNDS) / sizeof(BOUNDS[0]); i++)
        rb_ary_push(a, ID2SYM(rb_intern(BOUNDS[i].name)));
    for (size_t i = 0; i < sizeof(OTHERS) / sizeof(OTHERS[0]); i++)
        rb_ary_push(a, ID2SYM(rb_intern(OTHERS[i])));
    return rb_obj_freeze(a);
}

static VALUE bounds_hash(void)
{
    VALUE h = rb_hash_new();
    for (size_t i = 0; i < sizeof(BOUNDS) / sizeof(BOUNDS[0]); i++)
        rb_hash_aset(h, ID2SYM(rb_intern(BOUNDS[i].name)),
                     rb_obj_freeze(rb_range_new(LL2NUM(BOUNDS[i].min), LL2NUM(BOUNDS[i].max), 0)));
    return rb_obj_freeze(h);
}

/* Seconds to ms. NaN and huge values would make the cast undefined; 1e9 s
 * (31 years) is as good as forever. */
static int64_t opt_ms(VALUE opts, const char *name)
{
    VALUE v = opt_get(opts, name);
    if (!rb_obj_is_kind_of(v, rb_cNumeric))
        rb_raise(rb_eArgError, "engine option %s must be a number of seconds", name);
    double s = NUM2DBL(v);
    if (!(s > 0))
        rb_raise(rb_eArgError, "engine option %s must be positive", name);
    return (int64_t)((s < 1e9 ? s : 1e9) * 1000);
}

static int opt_bool(VALUE opts, const char *name)
{
    VALUE v = opt_get(opts, name);
    if (v != Qtrue && v != Qfalse)
        rb_raise(rb_eArgError, "engine option %s must be true or false", name);
    return v == Qtrue;
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

/* [[packed address, prefix bits], ...] (Config#engine_options, from
 * trusted_proxies) into e->trusted. */
static void trusted_networks(struct oribi_engine *e, VALUE nets)
{
    Check_Type(nets, T_ARRAY);
    if (RARRAY_LEN(nets) > ORIBI_MAX_TRUSTED)
        rb_raise(rb_eArgError, "at most %d trusted proxies", ORIBI_MAX_TRUSTED);
    e->ntrusted = 0;
    for (long i = 0; i < RARRAY_LEN(nets); i++) {
        VALUE n = rb_ary_entry(nets, i);
        Check_Type(n, T_ARRAY);
        VALUE addr = rb_ary_entry(n, 0);
        StringValue(addr);
        long len = RSTRING_LEN(addr);
        int prefix = NUM2INT(rb_ary_entry(n, 1));
        if ((len != 4 && len != 16) || prefix < 0 || prefix > len * 8)
            rb_raise(rb_eArgError, "engine option trusted_networks: a bad network");
        struct oribi_net *t = &e->trusted[e->ntrusted++];
        memset(t, 0, sizeof(*t));
        memcpy(t->addr, RSTRING_PTR(addr), (size_t)len);
        t->len = (int)len;
        t->prefix = prefix;
    }
}

/* An option the listeners carry, not Config (one entry per fd, in the
 * fds' order): the Array, or nil when not given. */
static VALUE per_listener(VALUE opts, const char *name, long n)
{
    VALUE v = rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qnil);
    if (NIL_P(v))
        return v;
    Check_Type(v, T_ARRAY);
    if (RARRAY_LEN(v) != n)
        rb_raise(rb_eArgError, "engine option %s: one per listener", name);
    return v;
}

/* The PROXY protocol versions each listener's connections open with
 * (Listeners#proxy_protocols: a mask of ORIBI_PROXY_V* each; a bind URI's
 * ?proxy_protocol=, else the proxy_protocol option); none when not given. */
static void listener_proxies(VALUE opts, struct oribi_listener *ls, long n)
{
    VALUE v = per_listener(opts, "proxy_protocols", n);
    for (long i = 0; i < n && !NIL_P(v); i++) {
        int mask = NUM2INT(rb_ary_entry(v, i));
        if (mask & ~(ORIBI_PROXY_V1 | ORIBI_PROXY_V2))
            rb_raise(rb_eArgError, "engine option proxy_protocols: a bad mask");
        ls[i].proxy = mask;
    }
}

/* The TLS settings of each listener (Listeners#tls_contexts: an
 * Oribi::TLSContext or nil each); none when not given. */
static void listener_tls(struct oribi_engine *e, VALUE opts, struct oribi_listener *ls, long n)
{
    VALUE v = per_listener(opts, "tls_contexts", n);
    if (NIL_P(v))
        return;
    e->tls_contexts = rb_obj_freeze(rb_ary_dup(v));
    for (long i = 0; i < n; i++) {
        VALUE ctx = rb_ary_entry(v, i);
        if (NIL_P(ctx))
            continue;
        ls[i].tls = oribi_tls_context(ctx);
        e->listeners[i].tls = 1;
    }
}

/* Engine.new(listener_fds, options) — options are documented in docs/CONFIGURATION.md */
static VALUE engine_init(VALUE self, VALUE fds, VALUE opts)
{
    struct oribi_engine *e = rb_check_typeddata(self, &engine_type);
    struct oribi_options o;
    struct oribi_listener ls[ORIBI_MAX_LISTENERS];
    Check_Type(fds, T_ARRAY);
    Check_Type(opts, T_HASH);
    oribi_rack_response_new_worker();
    long n = RARRAY_LEN(fds);
    if (n < 1 || n > ORIBI_MAX_LISTENERS)
        rb_raise(rb_eArgError, "1 to %d listeners", ORIBI_MAX_LISTENERS);

    memset(&o, 0, sizeof(o));
    o.limits.max_request_line = (size_t)opt_bounded(opts, "max_request_line");
    o.limits.max_header_bytes = (size_t)opt_bounded(opts, "max_header_bytes");
    o.limits.max_headers = (size_t)opt_bounded(opts, "max_headers");
    o.keepalive = opt_bool(opts, "keepalive");
    o.keepalive_requests = (unsigned)opt_bounded(opts, "keepalive_requests");
    o.keepalive_timeout_ms = opt_ms(opts, "keepalive_timeout");
    o.header_timeout_ms = opt_ms(opts, "header_timeout");
    o.body_timeout_ms = opt_ms(opts, "body_timeout");
    o.write_timeout_ms = opt_ms(opts, "write_timeout");
    o.max_body = opt_bounded(opts, "max_body");
    o.body_buffer = (size_t)opt_bounded(opts, "body_buffer");
    o.max_connections = (unsigned)opt_bounded(opts, "max_connections");
    o.max_write_backlog = (size_t)opt_bounded(opts, "max_write_backlog");
    o.max_response_spool = opt_bounded(opts, "max_response_spool");
    o.max_worker_spool = (size_t)opt_bounded(opts, "max_worker_spool");
    o.min_body_rate = opt_bounded(opts, "min_body_rate");
    o.busy_poll_us = opt_bounded(opts, "busy_poll");
    e->oob_gc = (uint64_t)opt_bounded(opts, "oob_gc");
    e->multiprocess = opt_bool(opts, "multiprocess") ? Qtrue : Qfalse;
    o.share_accepts = RTEST(e->multiprocess);
    VALUE tmpdir = opt_get(opts, "tmpdir");
    if (!RB_TYPE_P(tmpdir, T_STRING))
        rb_raise(rb_eArgError, "engine option tmpdir must be a String");
    e->tmpdir = rb_obj_freeze(rb_str_new_cstr(StringValueCStr(tmpdir)));
    o.tmpdir = RSTRING_PTR(e->tmpdir);
    int64_t threads = opt_bounded(opts, "threads");
    /* io_threads: exchanges beyond threads, for requests marked io_bound */
    int64_t io_threads = opt_bounded(opts, "io_threads");
    if (threads + io_threads > ORIBI_MAX_THREADS)
        rb_raise(rb_eArgError, "engine options threads and io_threads: %d at most together", ORIBI_MAX_THREADS);
    e->regular = (int)threads;
    threads += io_threads;
    /* fibers: that many requests at once, each a fiber (docs/FIBERS.md) */
    int64_t fibers = opt_bounded(opts, "fibers");
    if (fibers)
        e->regular = (int)(threads = fibers);
    e->fibers = fibers > 0;
    e->multithread = threads > 1 ? Qtrue : Qfalse;
    e->max_streams = (int)opt_bounded(opts, "max_streams");
    e->early_hints = opt_bool(opts, "early_hints");
    trusted_networks(e, opt_get(opts, "trusted_networks"));
    VALUE addr_header = opt_get(opts, "remote_addr_header");
    if (!NIL_P(addr_header) && (!RB_TYPE_P(addr_header, T_STRING) || RSTRING_LEN(addr_header) == 0))
        rb_raise(rb_eArgError, "engine option remote_addr_header must be nil or a field name");
    e->addr_header = NIL_P(addr_header) ? Qnil : rb_obj_freeze(rb_str_dup(addr_header));
    VALUE url_scheme = opt_get(opts, "url_scheme");
    if (!NIL_P(url_scheme))
        e->url_scheme = rb_str_to_interned_str(StringValue(url_scheme)); /* in every env, as "http" is */
    e->started_us = opt_int(opts, "started_ms", 0, INT64_MAX / 1000) * 1000;

    memset(ls, 0, sizeof(ls));
    for (long i = 0; i < n; i++)
        describe_listener(&e->listeners[i], &ls[i], NUM2INT(rb_ary_entry(fds, i)));
    listener_proxies(opts, ls, n);
    listener_tls(e, opts, ls, n);
    if (oribi_loop_init(&e->loop, &o, ls, (int)n) < 0)
        rb_sys_fail("oribi loop");
    e->ready = 1;
    e->hb.loop = &e->loop;
    e->hb.direct = threads == 1; /* the loop is not running while the only thread responds */
    e->hb.in_loop = &e->in_loop;
    e->hb.dispatcher = &e->dispatcher;
    e->exchanges = ZALLOC_N(struct oribi_exchange, threads);
    e->free_ix = ALLOC_N(int, threads);
    e->exchanges_len = e->nexchanges = (int)threads;
    for (int i = 0; i < threads; i++) /* the first on top */
        e->free_ix[e->nfree_ix++] = (int)threads - 1 - i;
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

static VALUE request_input(struct oribi_exchange *x, struct oribi_conn *c)
{
    int fd = oribi_conn_take_body_fd(c);
    if (fd >= 0) {
        VALUE io = rb_funcall(rb_cFile, id_for_fd, 2, INT2FIX(fd), rb_str_new_cstr("rb"));
        x->spilled_input = io;
        return io;
    }
    if (c->body_mem)
        return rb_funcall(cStringIO, id_new, 1, rb_str_new(c->buf + c->head_len, (long)c->body_mem));
    return x->ctx.empty_input;
}

/* Whether addr (len bytes) is in net. */
static int net_has(const struct oribi_net *net, const unsigned char *addr, int len)
{
    if (net->len != len)
        return 0;
    int full = net->prefix / 8, rest = net->prefix % 8;
    if (memcmp(net->addr, addr, (size_t)full) != 0)
        return 0;
    return !rest || ((net->addr[full] ^ addr[full]) & (0xff00 >> rest) & 0xff) == 0;
}

/* Whether the conn's peer is a trusted proxy. A unix socket peer is
 * 127.0.0.1 (as in the access log); an IPv4-mapped IPv6 peer is its IPv4
 * address. */
static int peer_trusted(const struct oribi_engine *e, const struct oribi_conn *c)
{
    static const unsigned char loopback[4] = {127, 0, 0, 1}, mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const unsigned char *addr = loopback;
    int len = 4;
    if (c->peer.ss_family == AF_INET) {
        addr = (const unsigned char *)&((const struct sockaddr_in *)&c->peer)->sin_addr;
    } else if (c->peer.ss_family == AF_INET6) {
        addr = ((const struct sockaddr_in6 *)&c->peer)->sin6_addr.s6_addr;
        if (memcmp(addr, mapped, 12) == 0)
            addr += 12;
        else
            len = 16;
    }
    for (int i = 0; i < e->ntrusted; i++)
        if (net_has(&e->trusted[i], addr, len))
            return 1;
    return 0;
}

/* How far a proxy's clock may run ahead of ours: a stamp up to this far
 * in the future is a queue time of 0, past it the stamp is refused. */
#define REQUEST_START_SKEW_US 1000000LL
/* How long before the server started a request may have been queued for
 * it: in a listen backlog that outlived the previous server (systemd's,
 * start_server's), or in a proxy's queue, whose clients give up sooner
 * (nginx's proxy_connect_timeout and haproxy's usual timeout queue are 60 s). */
#define REQUEST_START_BEFORE_US 60000000LL

/* The scoreboard learns what goes to the app, and the request's queue
 * time: from X-Request-Start when a trusted proxy sent a plausible one,
 * else from when the loop first saw the request. Plausible: not more
 * than a queue's patience before the server started, and not past our
 * clock by more than the skew. A refused stamp is counted: a proxy that passes
 * a client's header on shows there. The worker is busy since its oldest
 * request in the app (request_timeout): this one when no other is. */
static void score_take(struct oribi_engine *e, struct oribi_exchange *x, struct oribi_conn *c)
{
    if (!e->score)
        return;
    int64_t mono_us = oribi_mono_us();
    x->started_ms = mono_us / 1000;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    int64_t queue_us = c->seen_us ? mono_us - c->seen_us : -1;
    int from_header = 0;
    /* Any other peer's stamp is the client's word: one moved the sum by a
     * day. The peer is looked up only when there is a stamp to trust. */
    int64_t start = oribi_request_start_us(&c->req);
    if (start >= 0 && peer_trusted(e, c)) {
        if (start < e->started_us - REQUEST_START_BEFORE_US || start > wall_us + REQUEST_START_SKEW_US) {
            from_header = -1;
        } else {
            queue_us = wall_us > start ? wall_us - start : 0;
            from_header = 1;
        }
    }
    oribi_score_take(e->score, wall_us / 1000, queue_us, from_header);
    if (!e->busy) {
        oribi_score_busy(e->score, c->req.method, c->req.method_len, c->req.target, c->req.target_len, x->started_ms);
        e->scored = x;
    }
}

/* x's response is over: idle, or busy since the oldest request left. */
static void score_done(struct oribi_engine *e, struct oribi_exchange *x)
{
    struct oribi_score *sc = e->score;
    if (!sc)
        return;
    oribi_score_done(sc);
    /* A hijacked request's conn is the app's (and recycled): not counted. */
    struct oribi_exchange *oldest = NULL;
    struct oribi_conn *oc = NULL;
    for (int i = 0; e->busy > 1 && i < e->nexchanges; i++) {
        struct oribi_exchange *o = &e->exchanges[i];
        struct oribi_conn *c = o != x ? oribi_exchange_conn(o) : NULL;
        if (c && (!oldest || o->started_ms < oldest->started_ms)) {
            oldest = o;
            oc = c;
        }
    }
    /* Which exchange is named, not when it started: two requests often start
     * in the same millisecond. */
    if (!oldest)
        oribi_score_idle(sc);
    else if (oldest != e->scored)
        oribi_score_busy(sc, oc->req.method, oc->req.method_len, oc->req.target, oc->req.target_len,
                         oldest->started_ms);
    e->scored = oldest;
}

static VALUE start_request(struct oribi_engine *e, struct oribi_exchange *x, struct oribi_conn *c)
{
    score_take(e, x, c);
    e->since_gc++;
    x->c = c;
    x->seq++;
    x->phase = PHASE_APP;
    x->io = x->stream = Qnil;
    e->busy++;
    if (e->score)
        e->score->in_app = (uint32_t)e->busy;
    struct oribi_env_own own = {
        .input = request_input(x, c),
        .hijack = oribi_ticket_new(cHijack, x, TICKET_HIJACK),
        .early_hints = x->ctx.early_hints ? oribi_ticket_new(cEarlyHints, x, TICKET_EARLY_HINTS) : Qnil,
        .io_bound = e->nexchanges > e->regular ? oribi_ticket_new(cIoBound, x, TICKET_IO_BOUND) : Qnil,
    };
    x->env = oribi_env_build(&x->ctx, c, &own);
    if (!NIL_P(e->addr_header) && peer_trusted(e, c))
        oribi_env_remote_addr_from(x->env, &c->req, RSTRING_PTR(e->addr_header), (size_t)RSTRING_LEN(e->addr_header));
    if (e->fibers) /* thousands may wait: each keeps no more than its bytes */
        oribi_conn_fit(c);
    return x->env;
}

static void end_request(struct oribi_exchange *x);
static void slot_free(struct oribi_engine *e, struct oribi_exchange *y);

/* Whether a request may be handed out: a free exchange, and fewer than
 * `threads` of the busy ones not marked io_bound (io_threads, as Puma 8's
 * max_io_threads: a marked request stops counting against threads). */
static int has_room(const struct oribi_engine *e)
{
    return e->busy < e->nexchanges && e->busy - e->io_bound < e->regular;
}

/* x's request marked io_bound (on), or no longer (its end): the engine's
 * count, and the scoreboard's copy for /stats. */
static void io_bound_mark(struct oribi_exchange *x, int on)
{
    x->io_bound = on;
    x->engine->io_bound += on ? 1 : -1;
    if (x->score)
        x->score->io_bound = (uint32_t)x->engine->io_bound;
}

/* env["puma.mark_as_io_bound"].call: the request waits on IO (an upstream,
 * a long poll) and stops counting against threads; the dispatcher, which
 * may be holding for want of room, looks again. Once per request; nothing
 * once the request is over. */
static VALUE engine_mark_io_bound(VALUE ticket)
{
    struct oribi_exchange *x = oribi_ticket_exchange(ticket, TICKET_IO_BOUND);
    if (!x || x->io_bound)
        return Qnil;
    io_bound_mark(x, 1);
    oribi_loop_wake(&x->engine->loop);
    return Qtrue;
}

static VALUE no_mark_call(VALUE self)
{
    (void)self;
    return Qnil;
}

/* Returns the next request's env, or nil once a stopping loop is drained. */
static VALUE engine_next_request(VALUE self)
{
    struct oribi_engine *e = oribi_engine_get(self);
    e->dispatcher = rb_thread_current();
    if (e->nexchanges == 1 && e->busy) /* the last one was never responded to: forget it */
        end_request(e->exchanges);
    if (e->oob_gc && e->since_gc >= 2 * e->oob_gc && !e->busy) {
        /* Never idle for N more requests: collect now, between two
         * requests, rather than never (see below). */
        e->since_gc = 0;
        oob_gc();
    }
    for (;;) {
        if (e->hb.n) /* from app threads, and from streams' threads */
            oribi_handbacks_drain(&e->hb);
        if (e->nexchanges > 1) {
            if (e->stop_pending) {
                oribi_loop_stop(&e->loop, e->stop_drain);
                e->stop_pending = 0;
            }
            /* All exchanges busy: the loop goes on with its conns (timers,
             * flushes, idle keep-alive) but accepts none and hands out
             * none, so that idle workers get the backlog. */
            oribi_loop_hold(&e->loop, !has_room(e));
        }
        struct oribi_conn *c = has_room(e) ? oribi_loop_take(&e->loop) : NULL;
        if (c) {
            struct oribi_exchange *x = &e->exchanges[e->free_ix[--e->nfree_ix]];
            if (!x->self)
                exchange_init(self, e, x);
            return start_request(e, x, c);
        }
        /* Under load the next request is often already there: look without
         * giving up the GVL, which costs a futex handoff each way. */
        intptr_t r = oribi_loop_run(&e->loop, 0);
        if (r == LOOP_READY)
            continue;
        /* Out-of-band GC (oob_gc): once N requests went by, at the first
         * moment the loop has nothing to do: every response handed to the
         * kernel (or waiting on its client), closed connections closed, no
         * request waiting or in an app thread. A worker that is never idle
         * collects after 2N requests, before taking the next one (above). */
        if (r == LOOP_IDLE && e->oob_gc && e->since_gc >= e->oob_gc && !e->busy) {
            e->since_gc = 0;
            oob_gc();
            continue;
        }
        if (r == LOOP_IDLE) {
            e->in_loop = 1;
            r = (intptr_t)rb_thread_call_without_gvl(run_nogvl, &e->loop, wake_ubf, &e->loop);
            e->in_loop = 0;
        }
        if (r == LOOP_STOPPED)
            return Qnil;
        if (r == LOOP_INTERRUPTED)
            rb_thread_check_ints(); /* trap handlers run here (they may call #stop) */
    }
}

/* What an app thread keeps of the buffer its response heads are built in
 * between requests: a usual head's worth. A fiber keeps none: thousands of
 * them wait at once, each exchange a request's for its life. */
#define EXCHANGE_OUT_KEEP 16384

static void end_request(struct oribi_exchange *x)
{
    int hijacked = x->phase == PHASE_HIJACKED;
    if (!x->carried)
        score_done(x->engine, x);
    if (!NIL_P(x->stream))
        oribi_stream_finish(x->stream);
    if (!NIL_P(x->spilled_input)) {
        VALUE io = x->spilled_input;
        x->spilled_input = Qnil;
        rb_io_close(io);
    }
    x->c = NULL;
    x->env = Qnil;
    x->phase = PHASE_NONE;
    x->resp = NULL;
    x->io = x->stream = Qnil;
    for (int k = 0; k < ORIBI_TICKETS; k++)
        x->tickets[k] = Qnil; /* kept ones do nothing now */
    if (x->io_bound)
        io_bound_mark(x, 0);
    if (x->out_cap > EXCHANGE_OUT_KEEP || x->carried || x->engine->fibers) { /* not kept for the thread's life */
        free(x->out);
        x->out = NULL;
        x->out_cap = x->out_len = 0;
    }
    if (x->carried) {
        slot_free(x->engine, x);
    } else {
        x->engine->free_ix[x->engine->nfree_ix++] = (int)(x - x->engine->exchanges);
        x->engine->busy--;
        if (x->engine->score)
            x->engine->score->in_app = (uint32_t)x->engine->busy;
        /* A response hands its conn back, which wakes the dispatcher; a
         * hijacked request hands nothing back, and the dispatcher may be
         * asleep holding its accepts for want of this exchange. */
        if (hijacked)
            oribi_loop_wake(&x->engine->loop);
    }
}

/* ---- streams (max_streams) ---- */

static void streams_count(struct oribi_engine *e, int by)
{
    e->streams += by;
    if (e->score)
        e->score->streams = (uint32_t)e->streams;
}

/* A free slot, made when none is: the stream limit bounds how many. */
static struct oribi_exchange *slot_take(VALUE self, struct oribi_engine *e)
{
    if (e->nfree)
        return e->free_slots[--e->nfree];
    if (!e->slots) {
        e->slots = ALLOC_N(struct oribi_exchange *, e->max_streams);
        e->free_slots = ALLOC_N(struct oribi_exchange *, e->max_streams);
    }
    struct oribi_exchange *y = ZALLOC(struct oribi_exchange);
    exchange_base(self, e, y);
    y->carried = 1;
    e->slots[e->nslots++] = y;
    return y;
}

static void slot_free(struct oribi_engine *e, struct oribi_exchange *y)
{
    e->free_slots[e->nfree++] = y;
    streams_count(e, -1);
}

/* The exchange of the pool serving env's request in the app, else NULL.
 * A large pool (fibers) is not searched: env's rack.hijack names it, unless
 * the app replaced that. */
static struct oribi_exchange *pool_exchange(struct oribi_engine *e, VALUE env)
{
    if (e->nexchanges > 8) {
        struct oribi_exchange *x = RB_TYPE_P(env, T_HASH) ? oribi_ticket_owner(rb_hash_lookup(env, k_hijack)) : NULL;
        if (x && x->env == env && x->phase != PHASE_NONE && !x->carried)
            return x;
    }
    for (struct oribi_exchange *x = e->exchanges, *end = x + e->nexchanges; x < end; x++)
        if (x->env == env && x->phase != PHASE_NONE)
            return x;
    return NULL;
}

/* engine.carry(env) → the Exchange to respond on (engine.respond takes it
 * for the env), or nil. The app returned a body that streams for env's
 * request: its response goes on in a slot of its own, and the pool
 * exchange it leaves serves the next request, so that a stream counts
 * against max_streams, not threads (nor request_timeout's clock). nil
 * when max_streams are carried already (said once in the log, counted in
 * the scoreboard): the response holds its app thread as any other. The
 * request's env callables (rack.hijack, rack.early_hints) do nothing from
 * here on: they act only while the app runs. */
static VALUE engine_carry(VALUE self, VALUE env)
{
    struct oribi_engine *e = oribi_engine_get(self);
    struct oribi_exchange *x = pool_exchange(e, env);
    if (!x || x->phase != PHASE_APP)
        return Qnil; /* hijacked, or not a request of the pool's */
    if (e->streams >= e->max_streams) {
        if (e->score)
            e->score->streams_held++;
        if (!e->streams_full_said) {
            e->streams_full_said = 1;
            oribi_log("max_streams (%d) reached: a stream beyond it holds its app thread until it ends (said once)",
                      e->max_streams);
        }
        return Qnil;
    }
    struct oribi_exchange *y = slot_take(self, e);
    y->c = x->c;
    y->env = x->env;
    y->seq++;
    y->started_ms = x->started_ms;
    y->phase = PHASE_APP;
    y->spilled_input = x->spilled_input; /* the body may still read it */
    x->spilled_input = Qnil;
    end_request(x);
    streams_count(e, 1);
    oribi_loop_wake(&e->loop); /* the dispatcher may hold for want of a free exchange */
    return y->self;
}

/* ---- rack.response_finished ---- */

static VALUE call_finished(VALUE arg)
{
    VALUE *a = (VALUE *)arg;
    return rb_funcallv(a[0], id_call, 4, a + 1);
}

static VALUE log_error(VALUE arg)
{
    VALUE *a = (VALUE *)arg;
    VALUE log = rb_const_get(rb_const_get(rb_cObject, rb_intern("Oribi")), rb_intern("Log"));
    return rb_funcall(log, id_error, 2, a[0], a[1]);
}

/* Each callable, last added first (SPEC), with (env, status, headers,
 * error); one that raises is logged and the others still run. */
static void response_finished(VALUE env, VALUE status, VALUE headers, VALUE error, int gone)
{
    VALUE list = rb_hash_lookup(env, k_response_finished);
    if (!RB_TYPE_P(list, T_ARRAY) || RARRAY_LEN(list) == 0)
        return;
    if (NIL_P(error) && gone)
        error = rb_exc_new_cstr(oribi_eClientGone, "the client went away before the response was complete");
    for (long i = RARRAY_LEN(list) - 1; i >= 0; i--) {
        if (i >= RARRAY_LEN(list)) /* a callable shortened the list */
            continue;
        VALUE a[5] = {RARRAY_AREF(list, i), env, status, headers, error};
        int state;
        rb_protect(call_finished, (VALUE)a, &state);
        if (state) {
            VALUE exc = rb_errinfo();
            rb_set_errinfo(Qnil);
            VALUE l[2] = {rb_str_new_cstr("rack.response_finished callable raised"),
                          rb_obj_is_kind_of(exc, rb_eException) ? exc : Qnil};
            rb_protect(log_error, (VALUE)l, &state);
            rb_set_errinfo(Qnil);
        }
    }
    RB_GC_GUARD(error);
}

/* ---- respond ---- */

static VALUE respond_all(VALUE arg)
{
    return rb_ensure(oribi_rack_response_write, arg, oribi_rack_response_close, arg);
}

/* After a full hijack the socket is the app's: the response is ignored
 * (SPEC), the body still closed. nil: what went out was the app's. */
static VALUE respond_hijacked(struct oribi_exchange *x, VALUE env, VALUE status, VALUE headers, VALUE body, VALUE error)
{
    struct oribi_rack_response r = {.x = x, .body = body, .to_close = body, .file_fd = -1, .spool = ORIBI_SPOOL_INIT};
    int state = 0;
    rb_protect(oribi_rack_response_close, (VALUE)&r, &state);
    VALUE exc = state ? rb_errinfo() : Qnil;
    rb_set_errinfo(Qnil);
    end_request(x);
    response_finished(env, status, headers, NIL_P(error) ? exc : error, 0);
    if (state)
        rb_jump_tag(state);
    return Qnil;
}

/* engine.respond(env, status, headers, body, error = nil) → the body bytes
 * written (or handed to the loop to send), for the access log; nil after a
 * full hijack, whose status and bytes the server never saw. error is what the app raised (the response is
 * then the server's 500), for rack.response_finished. The body is always
 * closed; when the app's response cannot be sent, the client gets a 500 if
 * nothing went out yet, else a close, and the exception is raised for the
 * caller to log. */
static VALUE engine_respond(int argc, VALUE *argv, VALUE self)
{
    VALUE env, status, headers, body, error;
    rb_scan_args(argc, argv, "41", &env, &status, &headers, &body, &error);
    struct oribi_engine *e = oribi_engine_get(self);
    struct oribi_exchange *x = oribi_exchange_of(env); /* a stream's (engine.carry) */
    if (x && x->carried && x->phase != PHASE_NONE)
        env = x->env;
    else if (!(x = pool_exchange(e, env)))
        rb_raise(rb_eArgError, "no request in progress for this env");
    if (!rb_obj_is_kind_of(error, rb_eException))
        error = Qnil;
    if (x->phase == PHASE_HIJACKED)
        return respond_hijacked(x, env, status, headers, body, error);
    struct oribi_conn *c = oribi_exchange_conn(x);
    if (!c)
        rb_raise(rb_eArgError, "no request in progress for this env");

    struct oribi_rack_response r = {.x = x,
                                    .c = c,
                                    .env = env,
                                    .body = body,
                                    .to_close = body,
                                    .headers = headers,
                                    .hijack = Qnil,
                                    .protocol = Qnil,
                                    .file_fd = -1,
                                    .spool = ORIBI_SPOOL_INIT,
                                    .app_length = -1};
    /* FIX2INT would raise on a Fixnum outside a C int, here, before the
     * response is set up: the exchange would never end. */
    long st = FIXNUM_P(status) ? FIX2LONG(status) : 0;
    r.status = st >= 100 && st <= 599 ? (int)st : 0;
    /* A stop that began while the app ran: this response is the last (the
     * loop decided keep-alive when it handed the request out). */
    if (oribi_loop_stopping(&e->loop))
        oribi_conn_no_keepalive(c);
    r.head_only = c->req.method_len == 4 && memcmp(c->req.method, "HEAD", 4) == 0;
    x->out_len = 0;
    x->phase = PHASE_RESPONDING;
    x->resp = &r;
    int state = 0;
    VALUE exc = Qnil;
    if (!r.status) { /* RFC 9110 15: a status is three digits, 1xx to 5xx */
        rb_protect(oribi_rack_response_close, (VALUE)&r, &state);
        rb_set_errinfo(Qnil);
        state = 0;
        r.status = 500;
        exc = rb_exc_new_str(rb_eArgError, rb_sprintf("status is not an Integer in 100..599: %+" PRIsVALUE, status));
    } else if (!RB_TYPE_P(headers, T_HASH)) {
        rb_protect(oribi_rack_response_close, (VALUE)&r, &state);
        rb_set_errinfo(Qnil);
        state = 0;
        r.status = 500;
        exc = rb_exc_new_str(rb_eTypeError, rb_sprintf("headers are not a Hash: %" PRIsVALUE, rb_obj_class(headers)));
    } else {
        rb_protect(respond_all, (VALUE)&r, &state);
        if (state) {
            exc = rb_errinfo();
            rb_set_errinfo(Qnil);
        }
    }
    int hijacked = x->phase == PHASE_HIJACKED; /* then c is the loop's to recycle */
    if (!NIL_P(exc)) {
        if (!hijacked)
            oribi_conn_no_keepalive(c);
        if (!r.flushed && !r.gone) {
            char out[512];
            int status = r.refused ? r.refused : 500;
            size_t n =
                oribi_error_response(out, sizeof(out), status, &x->date, time(NULL), 0, oribi_is_head(c->buf, c->len));
            struct iovec iov = {out, n};
            if (oribi_conn_write(c, &iov, 1) < 0)
                r.gone = 1;
        }
    }
    if (!hijacked) { /* else the app has the socket and c is recycled */
        if (r.gone) {
            /* Gone, or took nothing for write_timeout: the connection is
             * dead, and what is kept for it goes now. */
            oribi_conn_no_keepalive(c);
            oribi_conn_discard_output(c);
        }
        oribi_handback(&e->hb, c);
    }
    end_request(x);
    /* A stream write to a gone client raised so that the body stops; that
     * is the client's doing, not an app error to log. */
    int quiet = r.gone && r.mode == BODY_STREAM;
    response_finished(env, status, headers, NIL_P(error) ? exc : error, r.gone);
    if (!NIL_P(exc) && !quiet) {
        if (rb_obj_is_kind_of(exc, rb_eException))
            rb_exc_raise(exc);
        rb_jump_tag(state);
    }
    RB_GC_GUARD(exc);
    return LL2NUM(r.sent);
}

/* engine.stop(drain = true): graceful drain; next_request returns nil once
 * in-flight requests are done. drain: true takes the backlog until it is
 * empty, an Integer at most that many connections of it, false none (see
 * oribi_loop_stop). Safe from a trap handler. */
static VALUE engine_stop(int argc, VALUE *argv, VALUE self)
{
    struct oribi_engine *e = oribi_engine_get(self);
    VALUE arg;
    rb_scan_args(argc, argv, "01", &arg);
    long drain = argc == 0 || arg == Qtrue ? -1 : RTEST(arg) ? NUM2LONG(arg) : 0;
    if (drain < -1)
        rb_raise(rb_eArgError, "drain must be true, false or a count");
    /* From an app thread while the dispatcher runs the loop: the dispatcher
     * stops it. (A trap handler runs on the dispatcher, the loop paused.) */
    if (e->in_loop && rb_thread_current() != e->dispatcher) {
        e->stop_drain = drain;
        e->stop_pending = 1;
    } else {
        oribi_loop_stop(&e->loop, drain);
    }
    oribi_loop_wake(&e->loop);
    return Qnil;
}

/* engine.attach_scoreboard(scoreboard, row): from now on the engine
 * keeps that row's score up to date (requests, connections, queue times). */
static VALUE engine_attach_scoreboard(VALUE self, VALUE sb, VALUE idx)
{
    struct oribi_engine *e = oribi_engine_get(self);
    e->score = oribi_scoreboard_row(sb, idx);
    e->head = oribi_scoreboard_head(sb);
    oribi_loop_share(&e->loop, e->score, e->head);
    e->scoreboard = sb;
    for (int i = 0; i < e->nexchanges; i++)
        e->exchanges[i].score = e->score;
    for (int i = 0; i < e->nslots; i++)
        e->slots[i]->score = e->score;
    oribi_score_attach(e->score, e->head); /* before any connection */
    return self;
}

static VALUE engine_close(VALUE self)
{
    struct oribi_engine *e = rb_check_typeddata(self, &engine_type);
    if (e->ready) {
        oribi_loop_free(&e->loop);
        e->ready = 0;
    }
    if (e->head) { /* a worker that goes on as the mold takes no more connections */
        oribi_score_release(e->score, e->head);
        e->head = NULL;
        oribi_loop_share(&e->loop, e->score, NULL);
    }
    return Qnil;
}

void Init_oribi_engine(VALUE mOribi)
{
    rb_require("stringio");
    cStringIO = rb_const_get(rb_cObject, rb_intern("StringIO"));
    rb_gc_register_mark_object(cStringIO);
    rb_require("oribi/empty_input");
    empty_input = rb_const_get(rb_const_get(mOribi, rb_intern("EmptyInput")), rb_intern("INSTANCE"));
    rb_gc_register_mark_object(empty_input);
    id_new = rb_intern("new");
    id_for_fd = rb_intern("for_fd");
    id_call = rb_intern("call");
    id_error = rb_intern("error");
    k_response_finished = oribi_fstr("rack.response_finished");
    k_hijack = oribi_fstr("rack.hijack");
    id_start = rb_intern("start");
    mGC = rb_const_get(rb_cObject, rb_intern("GC"));
    minor_gc_opts = rb_hash_new();
    rb_hash_aset(minor_gc_opts, ID2SYM(rb_intern("full_mark")), Qfalse);
    rb_hash_aset(minor_gc_opts, ID2SYM(rb_intern("immediate_sweep")), Qtrue);
    rb_obj_freeze(minor_gc_opts);
    rb_gc_register_mark_object(minor_gc_opts);
    oribi_env_init();
    Init_oribi_rack_response();
    Init_oribi_hijack();
    Init_oribi_stream(mOribi);

    cEngine = rb_define_class_under(mOribi, "Engine", rb_cObject);
    rb_define_alloc_func(cEngine, engine_alloc);
    rb_define_method(cEngine, "initialize", engine_init, 2);
    /* threads' upper bound, which Config checks against */
    rb_define_const(cEngine, "MAX_THREADS", INT2NUM(ORIBI_MAX_THREADS));
    rb_define_const(cEngine, "MAX_STREAMS", INT2NUM(ORIBI_MAX_STREAMS));
    rb_define_const(cEngine, "MAX_FIBERS", INT2NUM(ORIBI_MAX_FIBERS));
    rb_define_const(cEngine, "MAX_TRUSTED", INT2NUM(ORIBI_MAX_TRUSTED));
    rb_define_const(cEngine, "BOUNDS", bounds_hash());
    rb_define_const(cEngine, "OPTIONS", options_list());
    rb_define_method(cEngine, "next_request", engine_next_request, 0);
    rb_define_method(cEngine, "respond", engine_respond, -1);
    rb_define_method(cEngine, "carry", engine_carry, 1);
    rb_define_method(cEngine, "stop", engine_stop, -1);
    rb_define_method(cEngine, "attach_scoreboard", engine_attach_scoreboard, 2);
    rb_define_method(cEngine, "close", engine_close, 0);
    /* One Exchange per app thread, what streams and env callables carry,
     * and Oribi::ClientGone, rack.response_finished's error when the client left */
    Init_oribi_exchange(mOribi, cEngine);
    /* env["rack.hijack"] and env["rack.early_hints"]: a ticket per request */
    cHijack = oribi_ticket_class(cEngine, "Hijack");
    rb_define_method(cHijack, "call", oribi_full_hijack, 0);
    cEarlyHints = oribi_ticket_class(cEngine, "EarlyHints");
    rb_define_method(cEarlyHints, "call", oribi_early_hints, 1);
    cIoBound = oribi_ticket_class(cEngine, "IoBound");
    rb_define_method(cIoBound, "call", engine_mark_io_bound, 0);
    /* Without io_threads a mark changes nothing, as in Puma without
     * max_io_threads: one frozen callable that does nothing, no object per
     * request. */
    VALUE cNoMark = rb_define_class_under(cEngine, "NoMark", rb_cObject);
    rb_define_method(cNoMark, "call", no_mark_call, 0);
    no_mark = rb_obj_freeze(rb_obj_alloc(cNoMark));
    rb_undef_alloc_func(cNoMark);
    rb_gc_register_mark_object(no_mark);
}
