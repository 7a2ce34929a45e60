/* Ruby-facing init functions of each layer. */
#ifndef ORIBI_H
#define ORIBI_H
#include <ruby.h>

extern VALUE mOribi;
void Init_oribi_parser(VALUE mOribi);       /* parser_ruby.c: Oribi::Parser (tests, fuzz seeds) */
void Init_oribi_engine(VALUE mOribi);       /* engine.c: Oribi::Engine (the worker's C loop) */
void Init_oribi_scoreboard(VALUE mOribi);   /* scoreboard.c: Oribi::Scoreboard (worker states) */
void Init_oribi_backlog(VALUE mOribi);      /* backlog.c: Oribi.listen_queue (listener backlogs) */
void Init_oribi_subreaper(VALUE mOribi);    /* subreaper.c: Oribi.child_subreaper! (refork) */
void Init_oribi_log_setup(VALUE mOribi);    /* log_setup.c: Oribi.log_setup (log_format) */
void Init_oribi_query_parser(VALUE mOribi); /* query_parser.c: Oribi::Query (fast_query_parser) */
void Init_oribi_tls_context(VALUE mOribi);  /* tls_context.c: Oribi::TLSContext (TLS listeners) */
void Init_oribi_tls_socket(VALUE mOribi);   /* tls_socket.c: Oribi::TLSSocket (a hijacked TLS connection) */
/* Row idx of an Oribi::Scoreboard (scoreboard.h); raises unless it is one. */
struct oribi_score *oribi_scoreboard_row(VALUE scoreboard, VALUE idx);
struct oribi_score_head *oribi_scoreboard_head(VALUE scoreboard);
#endif
