/*
 * Oribi::Loadgen::Results: records of results streams (results.h) added up
 * into a run's result, for `oribi bench report`. The Ruby side reads the
 * files' headers and summaries; the records, untrusted bytes, are read here.
 */
#include <ruby.h>
#include <stdlib.h>
#include "loadgen_ruby.h"
#include "results.h"

static void results_free(void *p)
{
    struct oribi_results *a = p;
    oribi_results_free(a);
    free(a);
}

static size_t results_size(const void *p)
{
    const struct oribi_results *a = p;
    return sizeof(*a) + a->series.cap * sizeof(*a->series.intervals) + a->capkeys * sizeof(*a->keys);
}

static const rb_data_type_t results_type = {
    .wrap_struct_name = "Oribi::Loadgen::Results",
    .function = {.dfree = results_free, .dsize = results_size},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE results_alloc(VALUE klass)
{
    struct oribi_results *a = malloc(sizeof(*a));
    if (a == NULL)
        rb_raise(rb_eNoMemError, "cannot allocate the results");
    oribi_results_init(a);
    return TypedData_Wrap_Struct(klass, &results_type, a);
}

static uint64_t interval_ns(VALUE v, const char *name)
{
    if (NIL_P(v))
        return 0;
    double d = NUM2DBL(v);
    if (!(d >= 0.001) || d > 1e6)
        rb_raise(rb_eArgError, "%s must be between 0.001 and 1e6 seconds", name);
    return (uint64_t)(d * 1e9);
}

/* Results.new(series_interval, hlog_interval): seconds, or nil for none. */
static VALUE results_init(VALUE self, VALUE series, VALUE hlog)
{
    struct oribi_results *a = rb_check_typeddata(self, &results_type);
    a->series_ns = interval_ns(series, "series_interval");
    a->hlog_ns = interval_ns(hlog, "hlog_interval");
    return self;
}

/* #add(bytes, offset_ns): adds the whole records of bytes; nil, or the byte
 * offset of a summary record, where adding stopped. */
static VALUE results_add(VALUE self, VALUE bytes, VALUE offset)
{
    struct oribi_results *a = rb_check_typeddata(self, &results_type);
    StringValue(bytes);
    size_t at = 0;
    int rc = oribi_results_add(a, (const unsigned char *)RSTRING_PTR(bytes), (size_t)RSTRING_LEN(bytes),
                               NUM2ULL(offset), &at);
    RB_GC_GUARD(bytes);
    if (rc == -1)
        rb_raise(oribi_lg_error_class(), "not a results record at byte %zu of the records", at);
    if (rc == -2)
        rb_raise(rb_eNoMemError, "out of memory adding results");
    return rc == 1 ? SIZET2NUM(at) : Qnil;
}

/* #result: the Hash Loadgen.run returns, from the records alone, plus
 * :last_sent_ns and :last_end_ns (for a stream cut short of its summary). */
static VALUE results_result(VALUE self)
{
    struct oribi_results *a = rb_check_typeddata(self, &results_type);
    a->res.series = a->series.intervals;
    a->res.nintervals = a->series.n;
    VALUE h = oribi_lg_result_hash(&a->res);
    a->res.series = NULL;
    rb_hash_aset(h, ID2SYM(rb_intern("last_sent_ns")), ULL2NUM(a->last_sent_ns));
    rb_hash_aset(h, ID2SYM(rb_intern("last_end_ns")), ULL2NUM(a->last_end_ns));
    return h;
}

/* #hlog: [[interval, HdrHistogram V2 bytes (uncompressed), max_us, count]]
 * for every hlog interval with samples, in order. */
static VALUE results_hlog(VALUE self)
{
    struct oribi_results *a = rb_check_typeddata(self, &results_type);
    oribi_results_sort(a);
    VALUE out = rb_ary_new();
    for (size_t i = 0; i < a->nkeys;) {
        size_t j = i;
        while (j < a->nkeys && a->keys[j] >> 32 == a->keys[i] >> 32)
            j++;
        VALUE buf = rb_str_buf_new((long)ORIBI_RESULT_HLOG_MAX(j - i));
        uint64_t max;
        size_t len = oribi_results_hdr_v2(a->keys + i, j - i, (unsigned char *)RSTRING_PTR(buf), &max);
        rb_str_set_len(buf, (long)len);
        rb_ary_push(out, rb_ary_new_from_args(4, ULL2NUM(a->keys[i] >> 32), buf, ULL2NUM(max), SIZET2NUM(j - i)));
        i = j;
    }
    return out;
}

void oribi_results_ruby_init(VALUE mLoadgen)
{
    VALUE c = rb_define_class_under(mLoadgen, "Results", rb_cObject);
    rb_define_alloc_func(c, results_alloc);
    rb_define_method(c, "initialize", results_init, 2);
    rb_define_method(c, "add", results_add, 2);
    rb_define_method(c, "result", results_result, 0);
    rb_define_method(c, "hlog", results_hlog, 0);
    rb_define_const(c, "RECORD_SIZE", INT2FIX(ORIBI_RESULT_SIZE));
}
