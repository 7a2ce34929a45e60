/* Shared by the two Ruby faces of the load generator: a run (loadgen_ruby.c)
 * and results streams read back (results_ruby.c). */
#ifndef ORIBI_LOADGEN_RUBY_H
#define ORIBI_LOADGEN_RUBY_H

#include <ruby.h>
#include "loadgen.h"

/* A result as the Hash Oribi::Loadgen.run returns. */
VALUE oribi_lg_result_hash(const struct oribi_lg_result *res);
/* Oribi::Loadgen::Error */
VALUE oribi_lg_error_class(void);
/* Defines Oribi::Loadgen::Results. */
void oribi_results_ruby_init(VALUE mLoadgen);

#endif
