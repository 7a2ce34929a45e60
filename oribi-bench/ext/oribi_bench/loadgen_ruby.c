/*
 * Oribi::Loadgen: the Ruby face of loadgen.c. Converts the options hash,
 * runs the engine without the GVL (so Ruby threads, a test server for
 * instance, keep running) and turns the result into a Hash.
 */
#include <ruby.h>
#include <ruby/thread.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "loadgen_ruby.h"
#include "loadgen_tls.h"
#include "os/wakeup.h"

static VALUE eLoadgenError;

VALUE oribi_lg_error_class(void)
{
    return eLoadgenError;
}

struct run {
    struct oribi_lg *lg;
    struct oribi_lg_result *res;
    int rc, open_loop;
    char err[256];
    /* With a block: the engine runs on a thread of its own (the runner)
     * while this Ruby thread wakes every slice to yield progress. */
    pthread_t runner;
    int runner_started, runner_joined;
    struct oribi_wakeup done, wake; /* the run is over / a Ruby interrupt */
};

#define SLICE_MS 250

static void *run_nogvl(void *p)
{
    struct run *r = p;
    r->rc = oribi_lg_run(r->lg, r->res, r->err, sizeof(r->err));
    return NULL;
}

/* Called by Ruby on Ctrl-C, Thread#raise, Thread#kill, Timeout. */
static void run_ubf(void *p)
{
    oribi_lg_stop(((struct run *)p)->lg);
}

static void *runner_main(void *p)
{
    struct run *r = p;
    r->rc = oribi_lg_run(r->lg, r->res, r->err, sizeof(r->err));
    oribi_wakeup_send(&r->done);
    return NULL;
}

/* Waits up to a slice for the run to end; returns whether it did. */
static void *slice_nogvl(void *p)
{
    struct run *r = p;
    struct pollfd pfd[2] = {{.fd = r->done.rfd, .events = POLLIN}, {.fd = r->wake.rfd, .events = POLLIN}};
    if (poll(pfd, 2, SLICE_MS) > 0 && (pfd[1].revents & POLLIN))
        oribi_wakeup_drain(&r->wake);
    return (pfd[0].revents & POLLIN) ? (void *)1 : NULL;
}

/* An interrupt only wakes the slice: Ruby then runs a trap handler (and
 * the block decides) or raises (and the ensure stops the run). */
static void slice_ubf(void *p)
{
    oribi_wakeup_send(&((struct run *)p)->wake);
}

static VALUE run_sliced(struct run *r)
{
    if (oribi_wakeup_open(&r->done) < 0 || oribi_wakeup_open(&r->wake) < 0)
        rb_sys_fail("wakeup");
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with Ruby */
    int rc = pthread_create(&r->runner, NULL, runner_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        rb_raise(eLoadgenError, "cannot start the run: %s", strerror(rc));
    r->runner_started = 1;
    ID stop = rb_intern("stop");
    for (;;) {
        void *done = rb_thread_call_without_gvl(slice_nogvl, r, slice_ubf, r);
        if (done) {
            pthread_join(r->runner, NULL);
            r->runner_joined = 1;
            return Qnil;
        }
        rb_thread_check_ints();
        uint64_t ok, failed;
        oribi_lg_progress(r->lg, &ok, &failed);
        VALUE ret = rb_yield_values(2, ULL2NUM(ok), ULL2NUM(failed));
        if (ret == ID2SYM(stop))
            oribi_lg_stop(r->lg);
    }
}

static VALUE latency_value(const struct oribi_hist *h, double pct)
{
    return h->count ? ULL2NUM(oribi_hist_percentile(h, pct)) : Qnil;
}

/* The percentile spectrum reported, [percentile, microseconds] pairs, for
 * the JSON report, the percentile curve and thresholds (Loadgen::SPECTRUM). */
static const double spectrum[] = {
    0, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95, 96, 97, 98, 99, 99.5, 99.9, 99.95, 99.99, 99.999, 100,
};

VALUE oribi_lg_result_hash(const struct oribi_lg_result *res)
{
    static const char *const error_names[ORIBI_LG_E_COUNT] = {
        [ORIBI_LG_E_CONNECT] = "connect", [ORIBI_LG_E_READ] = "read",   [ORIBI_LG_E_WRITE] = "write",
        [ORIBI_LG_E_TIMEOUT] = "timeout", [ORIBI_LG_E_PARSE] = "parse", [ORIBI_LG_E_TLS] = "tls",
    };
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("requests")), ULL2NUM(res->requests));

    VALUE errors = rb_hash_new();
    for (int k = 0; k < ORIBI_LG_E_COUNT; k++)
        rb_hash_aset(errors, ID2SYM(rb_intern(error_names[k])), ULL2NUM(res->errors[k]));
    rb_hash_aset(h, ID2SYM(rb_intern("errors")), errors);

    /* {kind => {errno => count}}, errno 0 for causes without one. */
    VALUE causes = rb_hash_new();
    for (int k = 0; k < ORIBI_LG_E_COUNT; k++) {
        VALUE by = rb_hash_new();
        for (int e = 0; e < ORIBI_LG_ERRNO_MAX; e++)
            if (res->causes[k][e])
                rb_hash_aset(by, INT2FIX(e), ULL2NUM(res->causes[k][e]));
        if (RHASH_SIZE(by))
            rb_hash_aset(causes, ID2SYM(rb_intern(error_names[k])), by);
    }
    rb_hash_aset(h, ID2SYM(rb_intern("causes")), causes);

    VALUE status = rb_hash_new();
    for (int s = 0; s < 600; s++)
        if (res->status[s])
            rb_hash_aset(status, INT2FIX(s), ULL2NUM(res->status[s]));
    rb_hash_aset(h, ID2SYM(rb_intern("status")), status);

    rb_hash_aset(h, ID2SYM(rb_intern("bytes_in")), ULL2NUM(res->bytes_in));
    rb_hash_aset(h, ID2SYM(rb_intern("bytes_out")), ULL2NUM(res->bytes_out));
    rb_hash_aset(h, ID2SYM(rb_intern("elapsed")), DBL2NUM(res->elapsed));
    rb_hash_aset(h, ID2SYM(rb_intern("attack")), DBL2NUM(res->attack));
    rb_hash_aset(h, ID2SYM(rb_intern("sent")), ULL2NUM(res->sent));
    rb_hash_aset(h, ID2SYM(rb_intern("retried")), ULL2NUM(res->retried));
    rb_hash_aset(h, ID2SYM(rb_intern("busy")), DBL2NUM(res->busy));
    rb_hash_aset(h, ID2SYM(rb_intern("start_unix_ns")), ULL2NUM(res->start_unix_ns));
    if (res->tls_handshakes) {
        rb_hash_aset(h, ID2SYM(rb_intern("tls_handshakes")), ULL2NUM(res->tls_handshakes));
        rb_hash_aset(h, ID2SYM(rb_intern("tls_resumed")), ULL2NUM(res->tls_resumed));
    }
    if (res->tls_error[0])
        rb_hash_aset(h, ID2SYM(rb_intern("tls_error")), rb_str_new_cstr(res->tls_error));
    if (res->output_errno)
        rb_hash_aset(h, ID2SYM(rb_intern("output_errno")), INT2FIX(res->output_errno));

    const struct oribi_hist *l = &res->latency;
    VALUE lat = rb_hash_new();
    rb_hash_aset(lat, ID2SYM(rb_intern("min")), l->count ? ULL2NUM(l->min) : Qnil);
    rb_hash_aset(lat, ID2SYM(rb_intern("mean")), l->count ? DBL2NUM(oribi_hist_mean(l)) : Qnil);
    rb_hash_aset(lat, ID2SYM(rb_intern("p50")), latency_value(l, 50));
    rb_hash_aset(lat, ID2SYM(rb_intern("p90")), latency_value(l, 90));
    rb_hash_aset(lat, ID2SYM(rb_intern("p95")), latency_value(l, 95));
    rb_hash_aset(lat, ID2SYM(rb_intern("p99")), latency_value(l, 99));
    rb_hash_aset(lat, ID2SYM(rb_intern("p999")), latency_value(l, 99.9));
    rb_hash_aset(lat, ID2SYM(rb_intern("max")), l->count ? ULL2NUM(l->max) : Qnil);
    rb_hash_aset(h, ID2SYM(rb_intern("latency")), lat);

    VALUE spec = rb_ary_new_capa((long)(sizeof(spectrum) / sizeof(spectrum[0])));
    for (size_t i = 0; l->count && i < sizeof(spectrum) / sizeof(spectrum[0]); i++)
        rb_ary_push(spec, rb_assoc_new(DBL2NUM(spectrum[i]), ULL2NUM(oribi_hist_percentile(l, spectrum[i]))));
    rb_hash_aset(h, ID2SYM(rb_intern("percentiles")), spec);

    /* Latency over time: one Hash per interval, by send time. */
    VALUE series = rb_ary_new_capa((long)res->nintervals);
    for (size_t i = 0; i < res->nintervals; i++) {
        const struct oribi_lg_interval *sl = &res->series[i];
        VALUE s = rb_hash_new();
        rb_hash_aset(s, ID2SYM(rb_intern("count")), ULL2NUM(sl->count));
        rb_hash_aset(s, ID2SYM(rb_intern("errors")), ULL2NUM(sl->errors));
        uint64_t n = sl->samples;
        rb_hash_aset(s, ID2SYM(rb_intern("mean")), n ? DBL2NUM(sl->sum_us / (double)n) : Qnil);
        rb_hash_aset(s, ID2SYM(rb_intern("p50")), n ? ULL2NUM(oribi_lg_interval_percentile(sl, 50)) : Qnil);
        rb_hash_aset(s, ID2SYM(rb_intern("p99")), n ? ULL2NUM(oribi_lg_interval_percentile(sl, 99)) : Qnil);
        rb_hash_aset(s, ID2SYM(rb_intern("max")), n ? ULL2NUM(sl->max_us) : Qnil);
        rb_ary_push(series, s);
    }
    rb_hash_aset(h, ID2SYM(rb_intern("series")), series);
    return h;
}

static VALUE run_body(VALUE p)
{
    struct run *r = (struct run *)p;
    /* Raises after the engine returned if an interrupt is pending; the
     * ensure below frees the run either way. */
    if (rb_block_given_p())
        run_sliced(r);
    else
        rb_thread_call_without_gvl(run_nogvl, r, run_ubf, r);
    if (r->rc < 0)
        rb_raise(eLoadgenError, "%s", r->err);
    VALUE h = oribi_lg_result_hash(r->res);
    if (r->open_loop) {
        rb_hash_aset(h, ID2SYM(rb_intern("late")), ULL2NUM(r->res->late));
        rb_hash_aset(h, ID2SYM(rb_intern("dropped")), ULL2NUM(r->res->dropped));
        rb_hash_aset(h, ID2SYM(rb_intern("scheduled")), ULL2NUM(r->res->sent + r->res->dropped));
        rb_hash_aset(h, ID2SYM(rb_intern("behind")), ULL2NUM(r->res->behind));
    }
    return h;
}

static VALUE run_ensure(VALUE p)
{
    struct run *r = (struct run *)p;
    if (r->runner_started && !r->runner_joined) {
        oribi_lg_stop(r->lg); /* the block raised, or an interrupt did */
        pthread_join(r->runner, NULL);
    }
    oribi_wakeup_close(&r->done);
    oribi_wakeup_close(&r->wake);
    oribi_lg_free(r->lg);
    free(r->res->series);
    free(r->res);
    return Qnil;
}

static const char *const known_keys[] = {
    "host",     "port",      "unix_path", "request",     "threads",         "connections",     "duration",
    "requests", "keepalive", "timeout",   "rate",        "max_connections", "series_interval", "warmup",
    "stages",   "output_fd", "tls",       "server_name", "insecure",        "tls_resume",      NULL,
};

static int check_key(VALUE key, VALUE val, VALUE arg)
{
    if (SYMBOL_P(key)) {
        const char *name = rb_id2name(SYM2ID(key));
        for (int i = 0; known_keys[i]; i++)
            if (strcmp(name, known_keys[i]) == 0)
                return ST_CONTINUE;
    }
    rb_raise(rb_eArgError, "unknown option %" PRIsVALUE, rb_inspect(key));
    return ST_STOP;
}

static VALUE opt(VALUE opts, const char *name)
{
    return rb_hash_lookup2(opts, ID2SYM(rb_intern(name)), Qundef);
}

/* The values with no default here: Oribi::Bench::OPTIONS has them. */
static VALUE opt_required(VALUE opts, const char *name)
{
    VALUE v = opt(opts, name);
    if (v == Qundef || NIL_P(v))
        rb_raise(rb_eArgError, "missing :%s", name);
    return v;
}

static unsigned opt_count(VALUE opts, const char *name, unsigned max)
{
    VALUE v = opt_required(opts, name);
    if (!RB_INTEGER_TYPE_P(v))
        rb_raise(rb_eArgError, ":%s must be an Integer", name);
    long n = NUM2LONG(v);
    if (n < 1 || (unsigned long)n > max)
        rb_raise(rb_eArgError, ":%s must be between 1 and %u", name, max);
    return (unsigned)n;
}

/* Seconds > 0; absent or nil: 0 (none) unless required. */
static double opt_seconds(VALUE opts, const char *name, int required)
{
    VALUE v = required ? opt_required(opts, name) : opt(opts, name);
    if (v == Qundef || NIL_P(v))
        return 0.0;
    double d = NUM2DBL(v);
    if (!(d > 0) || d > 1e7)
        rb_raise(rb_eArgError, ":%s must be a positive number of seconds", name);
    return d;
}

static const char *opt_cstr(VALUE opts, const char *name, VALUE *keep)
{
    VALUE v = opt(opts, name);
    if (v == Qundef || NIL_P(v))
        return NULL;
    if (RB_INTEGER_TYPE_P(v))
        v = rb_funcall(v, rb_intern("to_s"), 0);
    *keep = v; /* the C string lives as long as this VALUE */
    return StringValueCStr(*keep);
}

/*
 * Oribi::Loadgen.engine_run(host:, port: | unix_path:, request:, threads:,
 *   connections:, duration: | requests:, keepalive:, timeout:,
 *   rate: | stages: (open loop, with max_connections:)) { |done, failed| ... }
 * Every value is given: Oribi::Loadgen.run (lib/oribi/loadgen.rb) fills
 * in the defaults of Oribi::Bench::OPTIONS. With a block, yields the
 * responses and failures so far about every 250 ms while the run goes on;
 * the block returning :stop ends the run early (the result still comes
 * back). See test/loadgen_test.rb.
 */
static VALUE loadgen_run(VALUE self, VALUE opts)
{
    Check_Type(opts, T_HASH);
    rb_hash_foreach(opts, check_key, Qnil);

    struct oribi_lg_config cfg = {0};
    VALUE keep_host = Qnil, keep_port = Qnil, keep_path = Qnil;
    cfg.unix_path = opt_cstr(opts, "unix_path", &keep_path);
    cfg.host = opt_cstr(opts, "host", &keep_host);
    cfg.port = opt_cstr(opts, "port", &keep_port);
    if (cfg.unix_path && (cfg.host || cfg.port))
        rb_raise(rb_eArgError, "give either :unix_path or :host and :port, not both");
    if (!cfg.unix_path && (!cfg.host || !cfg.port))
        rb_raise(rb_eArgError, "missing :unix_path, or :host and :port");

    VALUE req = opt(opts, "request"), ends_tmp = 0;
    if (req != Qundef && RB_TYPE_P(req, T_ARRAY)) {
        /* Several requests, sent in turn: one buffer and where each ends. */
        long n = RARRAY_LEN(req);
        if (n < 1 || n > 1000000)
            rb_raise(rb_eArgError, ":request Array must hold 1 to 1000000 requests");
        size_t *ends = ALLOCV_N(size_t, ends_tmp, n);
        VALUE all = rb_str_buf_new(0);
        for (long i = 0; i < n; i++) {
            VALUE one = rb_ary_entry(req, i);
            if (!RB_TYPE_P(one, T_STRING) || RSTRING_LEN(one) == 0)
                rb_raise(rb_eArgError, ":request Array must hold non-empty Strings");
            rb_str_buf_append(all, one);
            ends[i] = (size_t)RSTRING_LEN(all);
        }
        req = all;
        cfg.request_ends = ends;
        cfg.nrequests = (unsigned)n;
    } else if (req == Qundef || !RB_TYPE_P(req, T_STRING) || RSTRING_LEN(req) == 0) {
        rb_raise(rb_eArgError, ":request must be a non-empty String (the raw HTTP request) or an Array of them");
    }
    cfg.request = RSTRING_PTR(req);
    cfg.request_len = (size_t)RSTRING_LEN(req);

    cfg.threads = opt_count(opts, "threads", 1024);
    cfg.connections = opt_count(opts, "connections", 1000000);
    cfg.timeout = opt_seconds(opts, "timeout", 1);
    VALUE nreq = opt(opts, "requests");
    if (nreq != Qundef && !NIL_P(nreq)) {
        if (!RB_INTEGER_TYPE_P(nreq) || NUM2LL(nreq) < 1)
            rb_raise(rb_eArgError, ":requests must be a positive Integer");
        cfg.requests = NUM2ULL(nreq);
    }
    cfg.duration = opt_seconds(opts, "duration", 0);
    VALUE rate = opt(opts, "rate");
    if (rate != Qundef && !NIL_P(rate)) {
        cfg.rate = NUM2DBL(rate);
        if (!(cfg.rate > 0) || cfg.rate > 1e8)
            rb_raise(rb_eArgError, ":rate must be between 0 and 1e8 requests per second");
        cfg.max_connections = opt_count(opts, "max_connections", 1000000);
    }
    VALUE stages_tmp = 0, stages = opt(opts, "stages");
    if (stages != Qundef && !NIL_P(stages)) {
        /* [[from, to, seconds], ...]: rate is their highest, duration their sum. */
        Check_Type(stages, T_ARRAY);
        long n = RARRAY_LEN(stages);
        if (n < 1 || n > ORIBI_LG_STAGES_MAX || cfg.rate > 0)
            rb_raise(rb_eArgError, ":stages must hold 1 to %d [from, to, seconds] and replaces :rate",
                     ORIBI_LG_STAGES_MAX);
        struct oribi_lg_stage *st = ALLOCV_N(struct oribi_lg_stage, stages_tmp, n);
        double total = 0;
        for (long i = 0; i < n; i++) {
            VALUE one = rb_ary_entry(stages, i);
            if (!RB_TYPE_P(one, T_ARRAY) || RARRAY_LEN(one) != 3)
                rb_raise(rb_eArgError, ":stages must hold [from, to, seconds] Arrays");
            st[i] = (struct oribi_lg_stage){NUM2DBL(rb_ary_entry(one, 0)), NUM2DBL(rb_ary_entry(one, 1)),
                                            NUM2DBL(rb_ary_entry(one, 2))};
            cfg.rate = fmax(cfg.rate, fmax(st[i].from, st[i].to));
            total += st[i].seconds;
        }
        cfg.stages = st;
        cfg.nstages = (unsigned)n;
        cfg.duration = total;
        cfg.max_connections = opt_count(opts, "max_connections", 1000000);
    }
    cfg.series_interval = opt_seconds(opts, "series_interval", 0);
    VALUE wu = opt(opts, "warmup");
    if (wu != Qundef && !NIL_P(wu)) {
        cfg.warmup = NUM2DBL(wu);
        if (!(cfg.warmup >= 0) || cfg.warmup > 1e7)
            rb_raise(rb_eArgError, ":warmup must be a number of seconds");
    }
    VALUE ofd = opt(opts, "output_fd");
    if (ofd != Qundef && !NIL_P(ofd)) {
        cfg.output_fd = NUM2INT(ofd);
        if (cfg.output_fd <= 0)
            rb_raise(rb_eArgError, ":output_fd must be an open file descriptor above 0");
    }
    VALUE tls = opt(opts, "tls"), keep_sni = Qnil;
    cfg.tls = tls != Qundef && RTEST(tls);
    cfg.server_name = opt_cstr(opts, "server_name", &keep_sni);
    VALUE insecure = opt(opts, "insecure");
    cfg.insecure = insecure != Qundef && RTEST(insecure);
    VALUE resume = opt(opts, "tls_resume");
    cfg.tls_resume = resume != Qundef && RTEST(resume);
    cfg.keepalive = RTEST(opt_required(opts, "keepalive")) ? 1 : 0;

    struct run r = {.rc = 0, .open_loop = cfg.rate > 0, .done = {-1, -1}, .wake = {-1, -1}};
    r.res = calloc(1, sizeof(*r.res));
    if (r.res == NULL)
        rb_raise(rb_eNoMemError, "cannot allocate the load generator result");
    r.lg = oribi_lg_new(&cfg, r.err, sizeof(r.err)); /* copies every string */
    if (ends_tmp)
        ALLOCV_END(ends_tmp);
    if (stages_tmp)
        ALLOCV_END(stages_tmp);
    if (r.lg == NULL) {
        free(r.res);
        rb_raise(eLoadgenError, "%s", r.err);
    }
    RB_GC_GUARD(keep_host);
    RB_GC_GUARD(keep_port);
    RB_GC_GUARD(keep_path);
    RB_GC_GUARD(keep_sni);
    RB_GC_GUARD(req);
    return rb_ensure(run_body, (VALUE)&r, run_ensure, (VALUE)&r);
}

/*
 * Oribi::Loadgen.histogram_percentiles(values, percentiles, parts = 1)
 * Records the Integer values (microseconds, say) into `parts` histograms,
 * round-robin, merges them and returns the value at each percentile: lets
 * tests check the histogram's precision and that merging loses nothing.
 */
static VALUE loadgen_histogram_percentiles(int argc, VALUE *argv, VALUE self)
{
    VALUE values, pcts, vparts;
    rb_scan_args(argc, argv, "21", &values, &pcts, &vparts);
    Check_Type(values, T_ARRAY);
    Check_Type(pcts, T_ARRAY);
    long parts = NIL_P(vparts) ? 1 : NUM2LONG(vparts);
    if (parts < 1 || parts > 64)
        rb_raise(rb_eArgError, "parts must be between 1 and 64");

    /* ALLOCV memory is reclaimed by the GC if a conversion below raises. */
    VALUE tmp;
    struct oribi_hist *h = ALLOCV(tmp, sizeof(*h) * (size_t)parts);
    for (long i = 0; i < parts; i++)
        oribi_hist_init(&h[i]);
    for (long i = 0; i < RARRAY_LEN(values); i++) {
        VALUE v = rb_ary_entry(values, i);
        if (!RB_INTEGER_TYPE_P(v) || (FIXNUM_P(v) ? FIX2LONG(v) < 0 : RTEST(rb_funcall(v, rb_intern("negative?"), 0))))
            rb_raise(rb_eArgError, "values must be non-negative Integers");
        oribi_hist_record(&h[i % parts], NUM2ULL(v));
    }
    for (long i = 1; i < parts; i++)
        oribi_hist_merge(&h[0], &h[i]);

    VALUE out = rb_ary_new_capa(RARRAY_LEN(pcts));
    for (long i = 0; i < RARRAY_LEN(pcts); i++) {
        double p = NUM2DBL(rb_ary_entry(pcts, i));
        if (!(p >= 0 && p <= 100))
            rb_raise(rb_eArgError, "percentiles must be between 0 and 100");
        rb_ary_push(out, h[0].count ? ULL2NUM(oribi_hist_percentile(&h[0], p)) : Qnil);
    }
    ALLOCV_END(tmp);
    return out;
}

/* Entry point of `oribi/oribi_bench`: Oribi::Loadgen, loaded only by
 * `oribi bench` and `oribi tune` (a worker never needs it). */
__attribute__((visibility("default"))) void Init_oribi_bench(void)
{
    VALUE parent = rb_define_module("Oribi");
    VALUE mLoadgen = rb_define_module_under(parent, "Loadgen");
    /* Raised when a run cannot start: bad address, no threads. */
    eLoadgenError = rb_define_class_under(mLoadgen, "Error", rb_eStandardError);
    rb_define_const(mLoadgen, "HISTOGRAM_MAX", ULL2NUM(ORIBI_HIST_MAX));
    /* Whether https:// works: built with OpenSSL. */
    rb_define_const(mLoadgen, "TLS", lg_tls_available() ? Qtrue : Qfalse);
    VALUE spec = rb_ary_new_capa((long)(sizeof(spectrum) / sizeof(spectrum[0])));
    for (size_t i = 0; i < sizeof(spectrum) / sizeof(spectrum[0]); i++)
        rb_ary_push(spec, DBL2NUM(spectrum[i]));
    rb_define_const(mLoadgen, "SPECTRUM", rb_obj_freeze(spec));
    rb_define_singleton_method(mLoadgen, "engine_run", loadgen_run, 1);
    rb_define_singleton_method(mLoadgen, "histogram_percentiles", loadgen_histogram_percentiles, -1);
    oribi_results_ruby_init(mLoadgen);
}
