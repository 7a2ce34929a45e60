/*
 * Oribi.log_setup(format, worker): the C loop's log lines (loop/log.c) in
 * the format Oribi::Log writes (0 text, 1 json, 2 ltsv), with the worker's
 * index (nil in the master).
 */
#include <ruby.h>

#include "loop/log.h"
#include "ruby/oribi.h"

static VALUE log_setup(VALUE mod, VALUE format, VALUE worker)
{
    int f = NUM2INT(format);
    if (f < ORIBI_LOG_TEXT || f > ORIBI_LOG_LTSV)
        rb_raise(rb_eArgError, "log format must be 0, 1 or 2");
    oribi_log_setup((enum oribi_log_format)f, NIL_P(worker) ? -1 : NUM2INT(worker));
    return Qnil;
}

void Init_oribi_log_setup(VALUE mOribi)
{
    rb_define_module_function(mOribi, "log_setup", log_setup, 2);
}
