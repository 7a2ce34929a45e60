/*
 * Oribi.child_subreaper!: the master adopts its orphaned descendants
 * (prctl PR_SET_CHILD_SUBREAPER, Linux 3.4+). With refork, workers are
 * forked by the mold through a short-lived middle process; once that one
 * exits they become the master's children, which it reaps and supervises
 * like the ones it forked itself.
 */
#include <ruby.h>
#include <sys/prctl.h>

#include "ruby/oribi.h"

static VALUE child_subreaper(VALUE mod)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        rb_sys_fail("prctl(PR_SET_CHILD_SUBREAPER)");
    return Qtrue;
}

void Init_oribi_subreaper(VALUE mOribi)
{
    rb_define_module_function(mOribi, "child_subreaper!", child_subreaper, 0);
}
