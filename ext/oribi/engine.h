/*
 * Internals shared by the files of Oribi::Engine:
 *   engine.c   the class: setup, next_request, respond, rack.response_finished
 *   respond.c  the response head and body (arrays, each, files), early hints
 *   stream.c   Oribi::Stream, what a streaming body (body.call) writes to
 *   hijack.c   handing the socket to the app (full and partial hijack)
 * A worker has one request in the app at a time: the engine keeps it as
 * the "current" request, which the shared env callables (rack.hijack,
 * rack.early_hints) and the stream act on.
 */
#ifndef ORIBI_ENGINE_H
#define ORIBI_ENGINE_H

#include <ruby.h>
#include <stdint.h>

#include "env.h"
#include "loop.h"

#define COALESCE_MAX 32768 /* streamed chunks are gathered up to this before a write */

enum { PHASE_NONE, PHASE_APP, PHASE_RESPONDING, PHASE_HIJACKED };

struct resp;

struct engine {
    struct oribi_loop loop;
    int ready;
    struct oribi_env_ctx ctx;
    struct oribi_env_listener listeners[ORIBI_MAX_LISTENERS];
    VALUE empty_input;
    VALUE spilled_input; /* the tmpfile IO of the request in the app, closed after it */
    VALUE tmpdir;
    char *out;           /* response head and coalesced body bytes not yet written */
    size_t out_len, out_cap;

    /* the current request */
    uint64_t cur_token;  /* its conn's token; 0 when there is none */
    VALUE cur_env;       /* its env: respond must be given this one */
    int cur_phase;
    struct resp *cur_resp; /* while PHASE_RESPONDING */
    VALUE cur_io;        /* the socket handed to the app (hijack), else nil */
    VALUE cur_stream;    /* the Oribi::Stream given to a streaming body, else nil */

    VALUE scoreboard;    /* the Oribi::Scoreboard holding slot, else nil */
    struct oribi_slot *slot; /* where this worker says what it is doing, or NULL */

    uint64_t oob_gc;     /* out-of-band GC every this many requests, 0 off */
    uint64_t since_gc;   /* requests taken since the last one */
};

enum { BODY_NONE, BODY_ARRAY, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE, BODY_FILE, BODY_STREAM, BODY_HIJACK };

struct resp {
    struct engine *e;
    VALUE engine;       /* the Oribi::Engine object of e */
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
/* The conn of the current request while the app or the response has it, else NULL. */
struct oribi_conn *oribi_engine_current(struct engine *e);
/* Waits for fd to become readable (RB_WAITFD_IN) or writable (RB_WAITFD_OUT)
 * for up to timeout_ms, running Ruby's interrupts meanwhile; 1 ready, 0 not. */
int oribi_engine_wait(int fd, int events, int64_t timeout_ms);
/* Sends every kept byte of c, waiting up to the write timeout each time the
 * socket is full; 0, -1 when the peer is gone (or the response ended while
 * we waited), -2 when it took nothing for the write timeout. */
int oribi_engine_drain(struct engine *e, struct oribi_conn *c);

/* respond.c */
VALUE oribi_respond_write(VALUE resp);  /* head and body; raises on app errors */
VALUE oribi_respond_close(VALUE resp);  /* closes the body (and the file) */
VALUE oribi_early_hints(VALUE self, VALUE headers);
void Init_oribi_respond(void);

/* stream.c */
VALUE oribi_stream_new(VALUE engine);
void oribi_stream_finish(VALUE stream); /* the response is over: the stream is closed */
void Init_oribi_stream(VALUE mOribi);

/* hijack.c */
/* The connection as an IO (TCPSocket or UNIXSocket) that yields the bytes
 * the client sent past the request first; the loop forgets the conn. Raises
 * Oribi::ClientGone when kept output cannot be flushed first. */
VALUE oribi_hijack_io(struct engine *e, struct oribi_conn *c);
VALUE oribi_full_hijack(VALUE self);   /* env["rack.hijack"] */
void Init_oribi_hijack(void);

#endif
