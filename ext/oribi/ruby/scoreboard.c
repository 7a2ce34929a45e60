/*
 * Oribi::Scoreboard: shared memory, mapped by the master before it forks,
 * with one row per worker (loop/score.h) where the worker's engine says
 * what it is doing: the request it is busy with and since when, how many
 * it served, its connections, its requests' queue times. The master reads
 * it to kill a worker stuck in a request past request_timeout, or silent
 * past worker_timeout, and to report stats,
 * without a pipe round trip or any help from the (maybe stuck) worker.
 */
#include "loop/score.h"

#include "os/clock.h"

#include <ruby.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ruby/oribi.h"

/* One mapping: the head, then the rows from the next cache line. */
#define HEAD_SIZE 64

struct oribi_scoreboard {
    void *map;
    struct oribi_score_head *head;
    struct oribi_score *rows;
    long nrows;
    size_t size;
};

static void sb_free(void *p)
{
    struct oribi_scoreboard *sb = p;
    if (sb->map)
        munmap(sb->map, sb->size);
    xfree(sb);
}

static const rb_data_type_t sb_type = {
    "Oribi::Scoreboard", {NULL, sb_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE sb_alloc(VALUE klass)
{
    struct oribi_scoreboard *sb = ZALLOC(struct oribi_scoreboard);
    return TypedData_Wrap_Struct(klass, &sb_type, sb);
}

static int64_t mono_ms(void)
{
    return oribi_mono_us() / 1000;
}

/* Scoreboard.new(rows) */
static VALUE sb_init(VALUE self, VALUE n)
{
    struct oribi_scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long rows = NUM2LONG(n);
    if (rows < 1 || rows > 65536)
        rb_raise(rb_eArgError, "1..65536 rows");
    sb->size = HEAD_SIZE + (size_t)rows * sizeof(struct oribi_score);
    void *p = mmap(NULL, sb->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        rb_sys_fail("mmap");
    sb->map = p;
    sb->head = p;
    sb->rows = (struct oribi_score *)((char *)p + HEAD_SIZE);
    sb->nrows = rows;
    return self;
}

struct oribi_score *oribi_scoreboard_row(VALUE self, VALUE i)
{
    struct oribi_scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long idx = NUM2LONG(i);
    if (idx < 0 || idx >= sb->nrows)
        rb_raise(rb_eIndexError, "row %ld out of 0...%ld", idx, sb->nrows);
    return &sb->rows[idx];
}

struct oribi_score_head *oribi_scoreboard_head(VALUE self)
{
    return ((struct oribi_scoreboard *)rb_check_typeddata(self, &sb_type))->head;
}

/* clear(row, pid, generation = 0): a new worker takes the row */
static VALUE sb_clear(int argc, VALUE *argv, VALUE self)
{
    VALUE i, pid, gen;
    rb_scan_args(argc, argv, "21", &i, &pid, &gen);
    struct oribi_score *s = oribi_scoreboard_row(self, i);
    memset((void *)s, 0, sizeof(*s));
    s->pid = NUM2INT(pid);
    s->generation = NIL_P(gen) ? 0 : NUM2UINT(gen);
    return Qnil;
}

/* unbusy(row): the master gave up on the request (the worker is killed):
 * not stuck any more as far as request_timeout goes, counters kept. */
static VALUE sb_unbusy(VALUE self, VALUE i)
{
    oribi_score_idle(oribi_scoreboard_row(self, i));
    return Qnil;
}

/* check_in(row): the worker lives (worker_timeout). From its check-in
 * thread, which needs the GVL: a worker stuck holding it, or stopped,
 * stops checking in. */
static VALUE sb_check_in(VALUE self, VALUE i)
{
    __atomic_store_n(&oribi_scoreboard_row(self, i)->checked_in_ms, mono_ms(), __ATOMIC_RELEASE);
    return Qnil;
}

#define SET(h, k, v) rb_hash_aset(h, ID2SYM(rb_intern(k)), v)

/* release(row): the row's worker is gone (reaped, or its engine closed):
 * what it counted in the head, taken back (loop/score.h). Once: a second
 * release takes back nothing. */
static VALUE sb_release(VALUE self, VALUE i)
{
    struct oribi_scoreboard *sb = rb_check_typeddata(self, &sb_type);
    oribi_score_release(oribi_scoreboard_row(self, i), sb->head);
    return Qnil;
}

/* head → {workers:, conns:, waiting:}: what the workers share (tests) */
static VALUE sb_head(VALUE self)
{
    struct oribi_scoreboard *sb = rb_check_typeddata(self, &sb_type);
    VALUE r = rb_hash_new();
    SET(r, "workers", UINT2NUM(__atomic_load_n(&sb->head->workers, __ATOMIC_RELAXED)));
    SET(r, "conns", UINT2NUM(__atomic_load_n(&sb->head->conns, __ATOMIC_RELAXED)));
    SET(r, "waiting", UINT2NUM(__atomic_load_n(&sb->head->waiting, __ATOMIC_RELAXED)));
    return r;
}

/* stats(row) → Hash: everything the row says, for the master
 * (request_timeout, worker_timeout, refork) and the control endpoint.
 * busy: seconds in the oldest request in the app, nil when idle; request:
 * that request ("GET /path"), nil when idle; silent: seconds since the
 * worker last checked in, nil before it first did; queue: the histogram's
 * per-bucket counts (not cumulative). */
static VALUE sb_stats(VALUE self, VALUE i)
{
    struct oribi_score *s = oribi_scoreboard_row(self, i);
    int64_t since = __atomic_load_n(&s->busy_since_ms, __ATOMIC_ACQUIRE);
    VALUE r = rb_hash_new();
    SET(r, "pid", INT2NUM(s->pid));
    SET(r, "busy", since ? DBL2NUM((double)(mono_ms() - since) / 1000.0) : Qnil);
    if (since) {
        char req[ORIBI_SCORE_REQUEST];
        memcpy(req, s->request, ORIBI_SCORE_REQUEST);
        req[ORIBI_SCORE_REQUEST - 1] = 0;
        SET(r, "request", rb_str_new_cstr(req));
    } else {
        SET(r, "request", Qnil);
    }
    int64_t checked = __atomic_load_n(&s->checked_in_ms, __ATOMIC_ACQUIRE);
    SET(r, "silent", checked ? DBL2NUM((double)(mono_ms() - checked) / 1000.0) : Qnil);
    SET(r, "served", ULL2NUM(s->served));
    SET(r, "dropped_headers", ULL2NUM(__atomic_load_n(&s->dropped_headers, __ATOMIC_RELAXED)));
    SET(r, "io_bound", UINT2NUM(s->io_bound));
    SET(r, "in_app", UINT2NUM(s->in_app));
    SET(r, "streams", UINT2NUM(s->streams));
    SET(r, "streams_held", ULL2NUM(s->streams_held));
    SET(r, "connections", UINT2NUM(s->conns));
    SET(r, "idle_connections", UINT2NUM(s->idle));
    SET(r, "generation", UINT2NUM(s->generation));
    int64_t last = s->last_request_ms;
    SET(r, "last_request_at", last ? DBL2NUM((double)last / 1000.0) : Qnil);
    VALUE q = rb_ary_new_capa(ORIBI_QUEUE_BUCKETS);
    for (int k = 0; k < ORIBI_QUEUE_BUCKETS; k++)
        rb_ary_push(q, ULL2NUM(s->queue[k]));
    SET(r, "queue", q);
    SET(r, "queue_sum", DBL2NUM((double)s->queue_sum_us / 1e6));
    SET(r, "queue_from_header", ULL2NUM(s->queue_header));
    SET(r, "queue_header_refused", ULL2NUM(s->queue_header_refused));
    return r;
}

static VALUE sb_size(VALUE self)
{
    struct oribi_scoreboard *sb = rb_check_typeddata(self, &sb_type);
    return LONG2NUM(sb->nrows);
}

/* Scoreboard::QUEUE_BOUNDS: the buckets' upper bounds in seconds (+Inf last omitted) */
static VALUE queue_bounds(void)
{
    VALUE a = rb_ary_new_capa(ORIBI_QUEUE_BUCKETS - 1);
    for (int k = 0; k < ORIBI_QUEUE_BUCKETS - 1; k++)
        rb_ary_push(a, DBL2NUM((double)oribi_queue_bounds_us[k] / 1e6));
    return rb_obj_freeze(a);
}

/* Scoreboard.parse_request_start(value) → microseconds or nil (tests) */
static VALUE sb_parse_request_start(VALUE klass, VALUE v)
{
    StringValue(v);
    int64_t us = oribi_parse_request_start(RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
    return us < 0 ? Qnil : LL2NUM(us);
}

void Init_oribi_scoreboard(VALUE mOribi)
{
    VALUE c = rb_define_class_under(mOribi, "Scoreboard", rb_cObject);
    rb_define_alloc_func(c, sb_alloc);
    rb_define_const(c, "QUEUE_BOUNDS", queue_bounds());
    rb_define_singleton_method(c, "parse_request_start", sb_parse_request_start, 1);
    rb_define_method(c, "initialize", sb_init, 1);
    rb_define_method(c, "unbusy", sb_unbusy, 1);
    rb_define_method(c, "check_in", sb_check_in, 1);
    rb_define_method(c, "clear", sb_clear, -1);
    rb_define_method(c, "release", sb_release, 1);
    rb_define_method(c, "head", sb_head, 0);
    rb_define_method(c, "stats", sb_stats, 1);
    rb_define_method(c, "size", sb_size, 0);
}
