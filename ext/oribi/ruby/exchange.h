/*
 * An exchange: what one app thread (docs/THREADS.md) has of the request it
 * serves, reused request after request: its conn, env, phase, response and
 * output buffer, and what the env callables (rack.hijack, rack.early_hints)
 * and a stream hold on to. The modules of the Ruby face below the engine
 * (rack_response, stream, hijack) work on an exchange, never on the engine.
 */
#ifndef ORIBI_EXCHANGE_H
#define ORIBI_EXCHANGE_H

#include <ruby.h>
#include <stdint.h>

#include "loop/loop.h"
#include "loop/spool.h"
#include "ruby/env.h"

enum { PHASE_NONE, PHASE_APP, PHASE_RESPONDING, PHASE_HIJACKED };

/* The env callables a request has of its own (oribi_ticket_new, below). */
enum oribi_ticket_kind { TICKET_HIJACK, TICKET_EARLY_HINTS, TICKET_IO_BOUND, ORIBI_TICKETS };

struct oribi_rack_response;
struct oribi_handbacks;
struct oribi_engine;

/* One request in the app. */
struct oribi_exchange {
    struct oribi_engine *engine;     /* engine.c's business only */
    const int *open;                 /* the engine is not closed */
    struct oribi_handbacks *hb;      /* where a conn goes when the app is done with it */
    const struct oribi_options *opt; /* the loop's: its timeouts */
    struct oribi_conn *c;            /* while PHASE_APP or PHASE_RESPONDING, else NULL */
    uint64_t seq;                    /* bumped per request: a waiter sees its response end */
    int64_t started_ms;              /* CLOCK_MONOTONIC when it went to the app (scoreboard) */
    VALUE env;                       /* Engine#respond must be given this one */
    int phase;
    struct oribi_rack_response *resp; /* while PHASE_RESPONDING */
    VALUE io;                         /* the socket handed to the app (hijack), else nil */
    VALUE stream;                     /* the Oribi::Stream given to a streaming body, else nil */
    VALUE spilled_input;              /* the tmpfile IO of the request, closed after it */
    VALUE self;                       /* what the exchange's streams carry */
    VALUE tickets[ORIBI_TICKETS];     /* the env callables of the request it serves (oribi_ticket_new) */
    int io_bound;                     /* its app marked the request as waiting on IO (io_threads) */
    int carried;                      /* a stream's slot (engine.h), not one of the pool's */
    struct oribi_env_ctx ctx;         /* the env template, with this exchange's callables */
    char *out;                        /* response head and chunk framing not yet written */
    struct oribi_date_cache date;     /* this exchange's thread's own (http/response.h) */
    size_t out_len, out_cap;
    struct oribi_score *score; /* the worker's scoreboard row (dropped headers), or NULL */
};

enum { BODY_NONE, BODY_ARRAY, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE, BODY_FILE, BODY_STREAM, BODY_HIJACK };

/* The response being written for an exchange's request. */
struct oribi_rack_response {
    struct oribi_exchange *x;
    struct oribi_conn *c;
    VALUE env;
    VALUE body;
    VALUE to_close; /* what gets #close: nil once to_ary took the body over */
    VALUE headers;
    VALUE hijack;   /* the rack.hijack response header (partial hijack), else nil */
    VALUE protocol; /* the accepted rack.protocol response header, else nil */
    int status;
    int refused; /* the status the server answers instead, when it refuses the app's response (else 500) */
    int flushed; /* bytes of this response went out */
    int mode;
    int head_only;
    int gone;     /* the peer went away: stop producing */
    int spooling; /* the conn keeps its share: further bytes go to the spool */
    struct oribi_spool spool;
    int64_t wait_ms;    /* a wait for the client shorter than write_timeout, else 0 */
    int file_fd;        /* BODY_FILE: the open file, else -1 */
    int64_t app_length; /* content-length the app gave, -1 none */
    int64_t sent;       /* body bytes written or handed to the loop (the access log's size) */
    int64_t file_size;  /* BODY_FILE: bytes to send */
};

/* Raised into the app when the client went away. */
extern VALUE oribi_eClientGone;

/* The class of the objects env callables and streams carry. */
extern VALUE oribi_cExchange;

/* The object for x, which keeps engine (a VALUE) alive. */
VALUE oribi_exchange_wrap(VALUE engine, struct oribi_exchange *x);
/* The exchange such an object carries; raises IOError once its engine is closed. */
struct oribi_exchange *oribi_exchange_get(VALUE exchange);
/* The exchange an Oribi::Engine::Exchange object carries, or NULL when obj
 * is no such object. */
struct oribi_exchange *oribi_exchange_of(VALUE obj);
/* The conn of the exchange's request while the app or the response has it, else NULL. */
struct oribi_conn *oribi_exchange_conn(struct oribi_exchange *x);
/* Under a Fiber::Scheduler (fibers, docs/FIBERS.md), the current fiber
 * waits as oribi_exchange_wait does and others run meanwhile: 1 ready, 0
 * not; -1 when there is no scheduler (the caller waits its own way). */
int oribi_exchange_fiber_wait(int fd, int events, int64_t timeout_ms);
/* Waits for fd to become readable (RB_WAITFD_IN) or writable (RB_WAITFD_OUT)
 * for up to timeout_ms, running Ruby's interrupts meanwhile; 1 ready, 0 not. */
int oribi_exchange_wait(int fd, int events, int64_t timeout_ms);
/* Sends every kept byte of c, waiting up to the write timeout each time the
 * socket is full; 0, -1 when the peer is gone (or the response ended while
 * we waited), -2 when it took nothing for the write timeout. */
int oribi_exchange_drain(struct oribi_exchange *x, struct oribi_conn *c);

/* A request's own callable (env["rack.hijack"], env["rack.early_hints"]):
 * an object of klass (made by oribi_ticket_class) that names its exchange,
 * one per request and kind, recorded as the exchange's current one. An app
 * may keep it (a background thread, a cache); once its request is over it
 * acts on no other. */
VALUE oribi_ticket_class(VALUE outer, const char *name);
VALUE oribi_ticket_new(VALUE klass, struct oribi_exchange *x, enum oribi_ticket_kind kind);
/* The ticket's exchange while it serves the ticket's request, else NULL;
 * raises IOError once the engine is closed. */
struct oribi_exchange *oribi_ticket_exchange(VALUE ticket, enum oribi_ticket_kind kind);

/* The exchange obj names when obj is a ticket, whichever request it was
 * made for; else NULL. */
struct oribi_exchange *oribi_ticket_owner(VALUE obj);

/* Oribi::ClientGone and Oribi::Engine::Exchange (under cEngine). */
void Init_oribi_exchange(VALUE mOribi, VALUE cEngine);

#endif
