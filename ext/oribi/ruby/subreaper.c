/*
 * Oribi.child_subreaper!: the master adopts its orphaned descendants
 * (Linux's prctl PR_SET_CHILD_SUBREAPER, FreeBSD's procctl
 * PROC_REAP_ACQUIRE). With refork, workers are forked by the mold through
 * a short-lived middle process; once that one exits they become the
 * master's children, which it reaps and supervises like the ones it forked
 * itself. Oribi.child_subreaper? says whether this build can (macOS
 * cannot: refork is refused there).
 */
#include <ruby.h>
#include <unistd.h>
#if defined(ORIBI_HAVE_PR_SET_CHILD_SUBREAPER)
#include <sys/prctl.h>
#elif defined(ORIBI_HAVE_PROC_REAP_ACQUIRE)
#include <sys/procctl.h>
#endif

#include "ruby/oribi.h"

static VALUE child_subreaper(VALUE mod)
{
#if defined(ORIBI_HAVE_PR_SET_CHILD_SUBREAPER)
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        rb_sys_fail("prctl(PR_SET_CHILD_SUBREAPER)");
#elif defined(ORIBI_HAVE_PROC_REAP_ACQUIRE)
    if (procctl(P_PID, getpid(), PROC_REAP_ACQUIRE, NULL) < 0)
        rb_sys_fail("procctl(PROC_REAP_ACQUIRE)");
#else
    rb_raise(rb_eNotImpError, "no child subreaper on this platform");
#endif
    return Qtrue;
}

static VALUE can_subreap(VALUE mod)
{
#if defined(ORIBI_HAVE_PR_SET_CHILD_SUBREAPER) || defined(ORIBI_HAVE_PROC_REAP_ACQUIRE)
    return Qtrue;
#else
    return Qfalse;
#endif
}

void Init_oribi_subreaper(VALUE mOribi)
{
    rb_define_module_function(mOribi, "child_subreaper!", child_subreaper, 0);
    rb_define_module_function(mOribi, "child_subreaper?", can_subreap, 0);
}
