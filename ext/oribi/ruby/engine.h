/*
 * Internals shared by the files of Oribi::Engine:
 *   engine.c   the class: setup, next_request, respond, rack.response_finished
 *   respond.c  the response head and body (arrays, each, files), early hints
 *   stream.c   Oribi::Stream, what a streaming body (body.call) writes to
 *   hijack.c   handing the socket to the app (full and partial hijack)
 * Each request in the app has a slot (one per app thread, see
 * docs/THREADS.md): its conn, env, phase, response and output buffer. The
 * env callables (rack.hijack, rack.early_hints) and the stream are bound to
 * a slot; respond finds the slot by the env.
 *
 * With one thread the loop runs on the app's thread between requests, and a
 * finished conn goes straight back to it. With several, the dispatcher
 * (Ruby's main thread) runs the loop without the GVL while app threads
 * respond: only the dispatcher touches loop structures. App threads write
 * to their own conn only (the loop leaves a CONN_APP conn alone) and hand
 * it back through a list the dispatcher drains, waking the loop.
 */
#ifndef ORIBI_ENGINE_H
#define ORIBI_ENGINE_H

#include <ruby.h>
#include <stdint.h>

#include "ruby/env.h"
#include "loop/loop.h"

#define COALESCE_MAX 32768 /* streamed chunks are gathered up to this before a write */

enum { PHASE_NONE, PHASE_APP, PHASE_RESPONDING, PHASE_HIJACKED };

#define ORIBI_MAX_THREADS 1024

struct resp;
struct engine;

/* One request in the app. */
struct oribi_slot {
    struct engine *e;
    struct oribi_conn *c;  /* while PHASE_APP or PHASE_RESPONDING, else NULL */
    uint64_t seq;          /* bumped per request: a waiter sees its response end */
    int64_t started_ms;    /* CLOCK_MONOTONIC when it went to the app (scoreboard) */
    VALUE env;             /* respond must be given this one */
    int phase;
    struct resp *resp;     /* while PHASE_RESPONDING */
    VALUE io;              /* the socket handed to the app (hijack), else nil */
    VALUE stream;          /* the Oribi::Stream given to a streaming body, else nil */
    VALUE spilled_input;   /* the tmpfile IO of the request, closed after it */
    VALUE empty_input;
    VALUE self;            /* what the slot's env callables carry */
    struct oribi_env_ctx ctx; /* the env template, with this slot's callables */
    char *out;             /* response head and coalesced body bytes not yet written */
    size_t out_len, out_cap;
};

struct oribi_handback {
    struct oribi_conn *c;
    int keepalive;
    int detach;            /* hijacked: the loop forgets the conn */
};

struct engine {
    struct oribi_loop loop;
    int ready;
    struct oribi_env_listener listeners[ORIBI_MAX_LISTENERS];
    VALUE tmpdir;
    int nslots, busy;      /* slots, slots in use */
    struct oribi_slot *slots;
    int in_loop;           /* the dispatcher is in the loop without the GVL */
    VALUE dispatcher;      /* the thread that calls next_request (marked by Ruby's thread list) */
    int stop_pending;      /* #stop from an app thread meanwhile */
    long stop_drain;       /* its argument for oribi_loop_stop */
    struct oribi_handback *handbacks; /* conns the app threads are done with */
    int nhandbacks, handback_cap;

    VALUE scoreboard;      /* the Oribi::Scoreboard holding loop.score (kept alive), else nil */
    struct oribi_slot *scored; /* the slot whose request the scoreboard names, NULL when idle */

    uint64_t oob_gc;       /* out-of-band GC every this many requests, 0 off */
    uint64_t since_gc;     /* requests taken since the last one */
};

enum { BODY_NONE, BODY_ARRAY, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE, BODY_FILE, BODY_STREAM, BODY_HIJACK };

struct resp {
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

extern VALUE oribi_eClientGone;

/* engine.c */
struct engine *oribi_engine_get(VALUE self); /* raises IOError once closed */
/* The slot an env callable or a stream carries (its engine checked open). */
struct oribi_slot *oribi_slot_get(VALUE slot);
/* The conn of the slot's request while the app or the response has it, else NULL. */
struct oribi_conn *oribi_slot_conn(struct oribi_slot *s);
/* Waits for fd to become readable (RB_WAITFD_IN) or writable (RB_WAITFD_OUT)
 * for up to timeout_ms, running Ruby's interrupts meanwhile; 1 ready, 0 not. */
int oribi_engine_wait(int fd, int events, int64_t timeout_ms);
/* Sends every kept byte of c, waiting up to the write timeout each time the
 * socket is full; 0, -1 when the peer is gone (or the response ended while
 * we waited), -2 when it took nothing for the write timeout. */
int oribi_engine_drain(struct oribi_slot *s, struct oribi_conn *c);
/* The app took the conn (hijack): the loop must forget it. */
void oribi_engine_detach(struct engine *e, struct oribi_conn *c);

/* respond.c */
VALUE oribi_respond_write(VALUE resp);  /* head and body; raises on app errors */
VALUE oribi_respond_close(VALUE resp);  /* closes the body (and the file) */
VALUE oribi_early_hints(VALUE slot, VALUE headers);
void Init_oribi_respond(void);

/* stream.c */
VALUE oribi_stream_new(VALUE slot);
void oribi_stream_finish(VALUE stream); /* the response is over: the stream is closed */
void Init_oribi_stream(VALUE mOribi);

/* hijack.c */
/* The connection as an IO (TCPSocket or UNIXSocket) that yields the bytes
 * the client sent past the request first; the loop forgets the conn. Raises
 * Oribi::ClientGone when kept output cannot be flushed first. */
VALUE oribi_hijack_io(struct oribi_slot *s, struct oribi_conn *c);
VALUE oribi_full_hijack(VALUE slot);   /* env["rack.hijack"] */
void Init_oribi_hijack(void);

#endif
