/*
 * A slot: one request in the app (one per app thread, docs/THREADS.md) with
 * its conn, env, phase, response and output buffer, and what the env
 * callables (rack.hijack, rack.early_hints) and a stream hold on to. The
 * modules of the Ruby face below the engine (respond, stream, hijack) work
 * on a slot, never on the engine.
 */
#ifndef ORIBI_SLOT_H
#define ORIBI_SLOT_H

#include <ruby.h>
#include <stdint.h>

#include "loop/loop.h"
#include "ruby/env.h"

#define COALESCE_MAX 32768 /* streamed chunks are gathered up to this before a write */

enum { PHASE_NONE, PHASE_APP, PHASE_RESPONDING, PHASE_HIJACKED };

struct oribi_resp;
struct oribi_handbacks;
struct oribi_engine;

/* One request in the app. */
struct oribi_slot {
    struct oribi_engine *e; /* its engine: engine.c's business only */
    const int *open;       /* the engine is not closed */
    struct oribi_handbacks *hb; /* where a conn goes when the app is done with it */
    const struct oribi_options *opt; /* the loop's: its timeouts */
    struct oribi_conn *c;  /* while PHASE_APP or PHASE_RESPONDING, else NULL */
    uint64_t seq;          /* bumped per request: a waiter sees its response end */
    int64_t started_ms;    /* CLOCK_MONOTONIC when it went to the app (scoreboard) */
    VALUE env;             /* respond must be given this one */
    int phase;
    struct oribi_resp *resp;     /* while PHASE_RESPONDING */
    VALUE io;              /* the socket handed to the app (hijack), else nil */
    VALUE stream;          /* the Oribi::Stream given to a streaming body, else nil */
    VALUE spilled_input;   /* the tmpfile IO of the request, closed after it */
    VALUE empty_input;
    VALUE self;            /* what the slot's env callables carry */
    struct oribi_env_ctx ctx; /* the env template, with this slot's callables */
    char *out;             /* response head and coalesced body bytes not yet written */
    size_t out_len, out_cap;
};

enum { BODY_NONE, BODY_ARRAY, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE, BODY_FILE, BODY_STREAM, BODY_HIJACK };

/* The response being written for a slot's request. */
struct oribi_resp {
    struct oribi_slot *s;
    struct oribi_conn *c;
    VALUE env;
    VALUE body;
    VALUE to_close;     /* what gets #close: nil once to_ary took the body over */
    VALUE headers;
    VALUE hijack;       /* the rack.hijack response header (partial hijack), else nil */
    VALUE protocol;     /* the accepted rack.protocol response header, else nil */
    int status;
    int flushed;        /* bytes of this response went out */
    int mode;
    int keepalive;
    int head_only;
    int gone;           /* the peer went away: stop producing */
    int file_fd;        /* BODY_FILE: the open file, else -1 */
    int64_t app_length; /* content-length the app gave, -1 none */
    int64_t sent;       /* body bytes sent (BODY_LENGTH) */
    int64_t file_size;  /* BODY_FILE: bytes to send */
};

/* Raised into the app when the client went away. */
extern VALUE oribi_eClientGone;

/* The class of the objects env callables and streams carry. */
extern VALUE oribi_cSlot;

/* The object for s, which keeps engine (a VALUE) alive. */
VALUE oribi_slot_wrap(VALUE engine, struct oribi_slot *s);
/* The slot such an object carries; raises IOError once its engine is closed. */
struct oribi_slot *oribi_slot_get(VALUE slot);
/* The conn of the slot's request while the app or the response has it, else NULL. */
struct oribi_conn *oribi_slot_conn(struct oribi_slot *s);
/* Waits for fd to become readable (RB_WAITFD_IN) or writable (RB_WAITFD_OUT)
 * for up to timeout_ms, running Ruby's interrupts meanwhile; 1 ready, 0 not. */
int oribi_slot_wait(int fd, int events, int64_t timeout_ms);
/* Sends every kept byte of c, waiting up to the write timeout each time the
 * socket is full; 0, -1 when the peer is gone (or the response ended while
 * we waited), -2 when it took nothing for the write timeout. */
int oribi_slot_drain(struct oribi_slot *s, struct oribi_conn *c);

/* Oribi::ClientGone and Oribi::Engine::Slot (under cEngine). */
void Init_oribi_slot(VALUE mOribi, VALUE cEngine);

#endif
