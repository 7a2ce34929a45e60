/* Entry point of the extension: only wires the layers into Ruby, and says
 * how it was built (ext/oribi/platform.rb): Oribi::EVENT_LOOP ("epoll",
 * "kqueue", or "kqueue (libkqueue)"), Oribi::PORTABLE (the build that
 * uses only what macOS and the BSDs offer) and Oribi::FDS_PER_CONNECTION. */
#include <stdio.h>
#include <string.h>
#include <ruby.h>
#include <ruby/version.h>
#include "ruby/oribi.h"

#if defined(ORIBI_POLL_EPOLL)
#define EVENT_LOOP "epoll"
#elif defined(ORIBI_LIBKQUEUE)
#define EVENT_LOOP "kqueue (libkqueue)"
#else
#define EVENT_LOOP "kqueue"
#endif

VALUE mOribi;

/* Ruby checks no ABI of a release's extensions: one built for another
 * minor version (a platform gem's .so copied by hand, lib/oribi/extension.rb
 * chooses by version) would run on structures laid out otherwise. */
static void same_ruby(void)
{
    char built[16];
    VALUE running = rb_const_get(rb_cObject, rb_intern("RUBY_VERSION"));
    snprintf(built, sizeof(built), "%d.%d.", RUBY_API_VERSION_MAJOR, RUBY_API_VERSION_MINOR);
    if (strncmp(StringValueCStr(running), built, strlen(built)) != 0)
        rb_raise(rb_eLoadError, "oribi: this oribi.so was built for Ruby %d.%d, not for this Ruby %" PRIsVALUE,
                 RUBY_API_VERSION_MAJOR, RUBY_API_VERSION_MINOR, running);
}

__attribute__((visibility("default"))) void Init_oribi(void)
{
    same_ruby();
    mOribi = rb_define_module("Oribi");
    rb_define_const(mOribi, "EVENT_LOOP", rb_obj_freeze(rb_str_new_cstr(EVENT_LOOP)));
#ifdef ORIBI_PORTABLE
    rb_define_const(mOribi, "PORTABLE", Qtrue);
#else
    rb_define_const(mOribi, "PORTABLE", Qfalse);
#endif
#ifdef ORIBI_LIBKQUEUE
    rb_define_const(mOribi, "FDS_PER_CONNECTION", INT2FIX(2)); /* os/poller_kqueue.h: the twin */
#else
    rb_define_const(mOribi, "FDS_PER_CONNECTION", INT2FIX(1));
#endif
    Init_oribi_parser(mOribi);
    Init_oribi_engine(mOribi);
    Init_oribi_scoreboard(mOribi);
    Init_oribi_backlog(mOribi);
    Init_oribi_subreaper(mOribi);
    Init_oribi_query_parser(mOribi);
    Init_oribi_log_setup(mOribi);
    Init_oribi_tls_context(mOribi);
    Init_oribi_tls_socket(mOribi);
}
