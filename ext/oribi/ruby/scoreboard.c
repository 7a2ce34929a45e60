/*
 * Oribi::Scoreboard: shared memory, mapped by the master before it forks,
 * with one slot per worker (scoreboard.h) where the worker's engine says
 * what it is doing: the request it is busy with and since when, how many
 * it served, its connections, its requests' queue times. The master reads
 * it to kill a worker stuck past worker_timeout and to report stats,
 * without a pipe round trip or any help from the (maybe stuck) worker.
 */
#include "loop/score.h"

#include "loop/clock.h"

#include <ruby.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ruby/oribi.h"

struct scoreboard {
    struct oribi_score *slots;
    long nslots;
    size_t size;
};

static void sb_free(void *p)
{
    struct scoreboard *sb = p;
    if (sb->slots)
        munmap(sb->slots, sb->size);
    xfree(sb);
}

static const rb_data_type_t sb_type = {"Oribi::Scoreboard", {NULL, sb_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

static VALUE sb_alloc(VALUE klass)
{
    struct scoreboard *sb = ZALLOC(struct scoreboard);
    return TypedData_Wrap_Struct(klass, &sb_type, sb);
}

static int64_t mono_ms(void) { return oribi_mono_us() / 1000; }

/* Scoreboard.new(slots) */
static VALUE sb_init(VALUE self, VALUE n)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long slots = NUM2LONG(n);
    if (slots < 1 || slots > 65536)
        rb_raise(rb_eArgError, "1..65536 slots");
    sb->size = (size_t)slots * sizeof(struct oribi_score);
    void *p = mmap(NULL, sb->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        rb_sys_fail("mmap");
    sb->slots = p;
    sb->nslots = slots;
    return self;
}

struct oribi_score *oribi_scoreboard_slot(VALUE self, VALUE i)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long idx = NUM2LONG(i);
    if (idx < 0 || idx >= sb->nslots)
        rb_raise(rb_eIndexError, "slot %ld out of 0...%ld", idx, sb->nslots);
    return &sb->slots[idx];
}

/* clear(slot, pid, generation = 0): a new worker takes the slot */
static VALUE sb_clear(int argc, VALUE *argv, VALUE self)
{
    VALUE i, pid, gen;
    rb_scan_args(argc, argv, "21", &i, &pid, &gen);
    struct oribi_score *s = oribi_scoreboard_slot(self, i);
    memset((void *)s, 0, sizeof(*s));
    s->pid = NUM2INT(pid);
    s->generation = NIL_P(gen) ? 0 : NUM2UINT(gen);
    return Qnil;
}

/* unbusy(slot): the master gave up on the request (the worker is killed):
 * not stuck any more as far as worker_timeout goes, counters kept. */
static VALUE sb_unbusy(VALUE self, VALUE i)
{
    oribi_score_idle(oribi_scoreboard_slot(self, i));
    return Qnil;
}

/* [pid, busy_seconds or nil, request, served] */
static VALUE sb_get(VALUE self, VALUE i)
{
    struct oribi_score *s = oribi_scoreboard_slot(self, i);
    int64_t since = __atomic_load_n(&s->busy_since_ms, __ATOMIC_ACQUIRE);
    char req[ORIBI_SLOT_REQUEST];
    memcpy(req, s->request, ORIBI_SLOT_REQUEST);
    req[ORIBI_SLOT_REQUEST - 1] = 0;
    VALUE busy = since ? DBL2NUM((double)(mono_ms() - since) / 1000.0) : Qnil;
    return rb_ary_new_from_args(4, INT2NUM(s->pid), busy, rb_str_new_cstr(req), ULL2NUM(s->served));
}

#define SET(h, k, v) rb_hash_aset(h, ID2SYM(rb_intern(k)), v)

/* stats(slot) → Hash: everything the slot says, for the control endpoint.
 * queue: the histogram's per-bucket counts (not cumulative). */
static VALUE sb_stats(VALUE self, VALUE i)
{
    struct oribi_score *s = oribi_scoreboard_slot(self, i);
    VALUE r = rb_hash_new();
    VALUE a = sb_get(self, i);
    SET(r, "pid", rb_ary_entry(a, 0));
    SET(r, "busy", rb_ary_entry(a, 1));
    SET(r, "request", NIL_P(rb_ary_entry(a, 1)) ? Qnil : rb_ary_entry(a, 2));
    SET(r, "served", rb_ary_entry(a, 3));
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
    return r;
}

static VALUE sb_size(VALUE self)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    return LONG2NUM(sb->nslots);
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
    rb_define_method(c, "clear", sb_clear, -1);
    rb_define_method(c, "get", sb_get, 1);
    rb_define_method(c, "stats", sb_stats, 1);
    rb_define_method(c, "size", sb_size, 0);
}
