/* Entry point of the extension: only wires the layers into Ruby. */
#include <ruby.h>
#include "ruby/oribi.h"

VALUE mOribi;

__attribute__((visibility("default"))) void Init_oribi(void)
{
    mOribi = rb_define_module("Oribi");
    Init_oribi_parser(mOribi);
    Init_oribi_engine(mOribi);
    Init_oribi_scoreboard(mOribi);
    Init_oribi_backlog(mOribi);
    Init_oribi_subreaper(mOribi);
    Init_oribi_query_parser(mOribi);
    Init_oribi_log_setup(mOribi);
}
