#include "ruby/exchange.h"

#include <ruby.h>
#include <ruby/fiber/scheduler.h>
#include <ruby/io.h>
#include <sys/time.h>

VALUE oribi_eClientGone;
VALUE oribi_cExchange;

struct exchange_ref {
    VALUE engine;
    struct oribi_exchange *x;
};

static void exchange_ref_mark(void *p)
{
    rb_gc_mark(((struct exchange_ref *)p)->engine);
}

static const rb_data_type_t exchange_type = {"Oribi::Engine::Exchange",
                                             {exchange_ref_mark, RUBY_TYPED_DEFAULT_FREE, NULL},
                                             NULL,
                                             NULL,
                                             RUBY_TYPED_FREE_IMMEDIATELY};

VALUE oribi_exchange_wrap(VALUE engine, struct oribi_exchange *x)
{
    struct exchange_ref *ref;
    VALUE obj = TypedData_Make_Struct(oribi_cExchange, struct exchange_ref, &exchange_type, ref);
    ref->engine = engine;
    ref->x = x;
    return obj;
}

struct oribi_exchange *oribi_exchange_get(VALUE exchange)
{
    struct exchange_ref *ref = rb_check_typeddata(exchange, &exchange_type);
    if (!*ref->x->open)
        rb_raise(rb_eIOError, "engine closed");
    return ref->x;
}

struct oribi_exchange *oribi_exchange_of(VALUE obj)
{
    return rb_typeddata_is_kind_of(obj, &exchange_type) ? oribi_exchange_get(obj) : NULL;
}

/* A ticket points at its exchange, kept valid by keeping the engine alive
 * (through the exchange's own object); no memory of its own: one object
 * per request. */
static void ticket_mark(void *p)
{
    rb_gc_mark(((struct oribi_exchange *)p)->self);
}

static const rb_data_type_t ticket_type = {
    "Oribi::Engine::Ticket", {ticket_mark, NULL, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

VALUE oribi_ticket_class(VALUE outer, const char *name)
{
    VALUE klass = rb_define_class_under(outer, name, rb_cObject);
    rb_undef_alloc_func(klass);
    return klass;
}

VALUE oribi_ticket_new(VALUE klass, struct oribi_exchange *x, enum oribi_ticket_kind kind)
{
    return x->tickets[kind] = TypedData_Wrap_Struct(klass, &ticket_type, x);
}

struct oribi_exchange *oribi_ticket_owner(VALUE obj)
{
    return rb_typeddata_is_kind_of(obj, &ticket_type) ? rb_check_typeddata(obj, &ticket_type) : NULL;
}

struct oribi_exchange *oribi_ticket_exchange(VALUE ticket, enum oribi_ticket_kind kind)
{
    struct oribi_exchange *x = rb_check_typeddata(ticket, &ticket_type);
    if (!*x->open)
        rb_raise(rb_eIOError, "engine closed");
    return x->tickets[kind] == ticket ? x : NULL;
}

struct oribi_conn *oribi_exchange_conn(struct oribi_exchange *x)
{
    return x->phase == PHASE_APP || x->phase == PHASE_RESPONDING ? x->c : NULL;
}

static VALUE autoclose_false;
static ID id_for_fd;

int oribi_exchange_fiber_wait(int fd, int events, int64_t timeout_ms)
{
    VALUE scheduler = rb_fiber_scheduler_current();
    if (NIL_P(scheduler))
        return -1;
    /* The scheduler waits on an IO: one for the conn's fd that never closes it. */
    VALUE io = rb_funcall(rb_cIO, id_for_fd, 2, INT2NUM(fd), autoclose_false);
    VALUE ready = rb_fiber_scheduler_io_wait(scheduler, io, INT2NUM(events), rb_float_new((double)timeout_ms / 1000.0));
    RB_GC_GUARD(io);
    return RTEST(ready);
}

int oribi_exchange_wait(int fd, int events, int64_t timeout_ms)
{
    int w = oribi_exchange_fiber_wait(fd, events, timeout_ms);
    if (w >= 0)
        return w;
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    return rb_wait_for_single_fd(fd, events, &tv) > 0;
}

int oribi_exchange_drain(struct oribi_exchange *x, struct oribi_conn *c)
{
    uint64_t seq = x->seq;
    while (c->wlen > c->woff) {
        if (oribi_conn_flush(c) < 0)
            return -1;
        if (c->wlen == c->woff)
            break;
        if (!oribi_exchange_wait(c->fd, RB_WAITFD_OUT, x->opt->write_timeout_ms))
            return -2;
        /* Other threads ran while we waited (one writing to a stream, say):
         * if the response ended meanwhile, c may be another request's now. */
        if (!*x->open || x->seq != seq || oribi_exchange_conn(x) != c)
            return -1;
    }
    return 0;
}

void Init_oribi_exchange(VALUE mOribi, VALUE cEngine)
{
    oribi_eClientGone = rb_define_class_under(mOribi, "ClientGone", rb_eIOError);
    oribi_cExchange = rb_define_class_under(cEngine, "Exchange", rb_cObject);
    id_for_fd = rb_intern("for_fd");
    autoclose_false = rb_hash_new();
    rb_hash_aset(autoclose_false, ID2SYM(rb_intern("autoclose")), Qfalse);
    rb_obj_freeze(autoclose_false);
    rb_gc_register_mark_object(autoclose_false);
    rb_undef_alloc_func(oribi_cExchange);
}
