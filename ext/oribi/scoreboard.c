/*
 * Oribi::Scoreboard: a page of shared memory, mapped by the master before
 * it forks, where each worker says what it is doing (the request it is
 * busy with and since when, how many it served). The master reads it to
 * kill a worker stuck past worker_timeout and to report stats, without a
 * pipe round trip or any help from the stuck worker.
 */
#include <ruby.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "oribi.h"

#define SLOT_PATH 120

struct slot {
    volatile int64_t busy_since_ms; /* CLOCK_MONOTONIC ms; 0 when idle */
    volatile uint64_t served;
    volatile int32_t pid;
    char request[SLOT_PATH];        /* "GET /path", cut to fit */
};

struct scoreboard {
    struct slot *slots;
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

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Scoreboard.new(slots) */
static VALUE sb_init(VALUE self, VALUE n)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long slots = NUM2LONG(n);
    if (slots < 1 || slots > 65536)
        rb_raise(rb_eArgError, "1..65536 slots");
    sb->size = (size_t)slots * sizeof(struct slot);
    void *p = mmap(NULL, sb->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        rb_sys_fail("mmap");
    sb->slots = p;
    sb->nslots = slots;
    return self;
}

static struct slot *get_slot(VALUE self, VALUE i)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    long idx = NUM2LONG(i);
    if (idx < 0 || idx >= sb->nslots)
        rb_raise(rb_eIndexError, "slot %ld out of 0...%ld", idx, sb->nslots);
    return &sb->slots[idx];
}

/* busy(slot, method, uri, since_ms = now): a request starts (since: when,
 * in CLOCK_MONOTONIC ms; with threads, the oldest one in the worker).
 * Copied straight into the slot ("GET /path", cut to fit): nothing is
 * allocated per request. The pid was set by clear() when the master forked
 * the worker. */
static VALUE sb_busy(int argc, VALUE *argv, VALUE self)
{
    VALUE i, method, uri, since;
    rb_scan_args(argc, argv, "31", &i, &method, &uri, &since);
    struct slot *s = get_slot(self, i);
    size_t n = 0;
    const VALUE parts[2] = {method, uri};
    for (int k = 0; k < 2; k++) {
        if (!RB_TYPE_P(parts[k], T_STRING))
            continue;
        size_t len = (size_t)RSTRING_LEN(parts[k]);
        if (k && n < SLOT_PATH - 1)
            s->request[n++] = ' ';
        if (len > SLOT_PATH - 1 - n)
            len = SLOT_PATH - 1 - n;
        memcpy(s->request + n, RSTRING_PTR(parts[k]), len);
        n += len;
    }
    s->request[n] = 0;
    __atomic_store_n(&s->busy_since_ms, NIL_P(since) ? mono_ms() : NUM2LL(since), __ATOMIC_RELEASE);
    return Qnil;
}

/* idle(slot): the response is out */
static VALUE sb_idle(VALUE self, VALUE i)
{
    struct slot *s = get_slot(self, i);
    __atomic_store_n(&s->busy_since_ms, 0, __ATOMIC_RELEASE);
    s->served++;
    return Qnil;
}

/* count(slot): a request is done, others still run (threads) */
static VALUE sb_count(VALUE self, VALUE i)
{
    get_slot(self, i)->served++;
    return Qnil;
}

/* clear(slot, pid): a new worker takes the slot */
static VALUE sb_clear(VALUE self, VALUE i, VALUE pid)
{
    struct slot *s = get_slot(self, i);
    memset((void *)s, 0, sizeof(*s));
    s->pid = NUM2INT(pid);
    return Qnil;
}

/* [pid, busy_seconds or nil, request, served] */
static VALUE sb_get(VALUE self, VALUE i)
{
    struct slot *s = get_slot(self, i);
    int64_t since = __atomic_load_n(&s->busy_since_ms, __ATOMIC_ACQUIRE);
    char req[SLOT_PATH];
    memcpy(req, s->request, SLOT_PATH);
    req[SLOT_PATH - 1] = 0;
    VALUE busy = since ? DBL2NUM((double)(mono_ms() - since) / 1000.0) : Qnil;
    return rb_ary_new_from_args(4, INT2NUM(s->pid), busy, rb_str_new_cstr(req), ULL2NUM(s->served));
}

static VALUE sb_size(VALUE self)
{
    struct scoreboard *sb = rb_check_typeddata(self, &sb_type);
    return LONG2NUM(sb->nslots);
}

void Init_oribi_scoreboard(VALUE mOribi)
{
    VALUE c = rb_define_class_under(mOribi, "Scoreboard", rb_cObject);
    rb_define_alloc_func(c, sb_alloc);
    rb_define_method(c, "initialize", sb_init, 1);
    rb_define_method(c, "busy", sb_busy, -1);
    rb_define_method(c, "count", sb_count, 1);
    rb_define_method(c, "idle", sb_idle, 1);
    rb_define_method(c, "clear", sb_clear, 2);
    rb_define_method(c, "get", sb_get, 1);
    rb_define_method(c, "size", sb_size, 0);
}
