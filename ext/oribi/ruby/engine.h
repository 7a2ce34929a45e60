/*
 * Oribi::Engine: a worker's loop and its app threads. engine.c sets it up,
 * hands out requests (next_request), takes responses (respond) and runs
 * rack.response_finished; below it, each app thread's exchange (exchange.h)
 * is what rack_response.c, stream.c and hijack.c work on, and handback.c
 * takes conns back to the loop. docs/DESIGN.md says which thread runs what.
 */
#ifndef ORIBI_ENGINE_H
#define ORIBI_ENGINE_H

#include <ruby.h>
#include <stdint.h>

#include "loop/loop.h"
#include "ruby/env.h"
#include "ruby/handback.h"
#include "ruby/exchange.h"

#define ORIBI_MAX_THREADS 1024

/* fibers: requests a worker runs at once as fibers, at most */
#define ORIBI_MAX_FIBERS 100000

#define ORIBI_MAX_TRUSTED 64

/* max_streams: responses a worker carries on beyond its threads at most */
#define ORIBI_MAX_STREAMS 1000000

struct oribi_engine {
    struct oribi_loop loop;
    int ready;
    struct oribi_env_listener listeners[ORIBI_MAX_LISTENERS];
    VALUE tmpdir;
    int nexchanges, busy; /* one exchange per app thread, those in use */
    int regular;          /* threads: busy exchanges not marked io_bound may be at most this many */
    int fibers;           /* the exchanges are fibers on one thread (fibers), not threads */
    int io_bound;         /* busy exchanges whose request is marked io_bound */
    struct oribi_exchange *exchanges;
    int exchanges_len; /* allocated; each is set up when first handed out (x->self) */
    int *free_ix;      /* nfree_ix free exchanges (indexes), the last freed on top */
    int nfree_ix;
    VALUE multiprocess, multithread; /* rack.multiprocess and rack.multithread */
    int early_hints;                 /* offer rack.early_hints */
    int in_loop;                     /* the dispatcher is in the loop without the GVL */
    VALUE dispatcher;                /* the thread that calls next_request (marked by Ruby's thread list) */
    int stop_pending;                /* #stop from an app thread meanwhile */
    long stop_drain;                 /* its argument for oribi_loop_stop */
    struct oribi_handbacks hb;       /* conns the app is done with */

    /* Streams (max_streams): a response whose body streams, carried on in
     * a slot of its own so that its pool exchange serves the next request.
     * Slots are made when first needed and kept for the next stream. */
    int max_streams, streams;           /* the limit; slots carrying one now */
    struct oribi_exchange **slots;      /* nslots made, each allocated alone (streams hold pointers) */
    struct oribi_exchange **free_slots; /* nfree of them free */
    int nslots, nfree;
    int streams_full_said; /* the log said max_streams was reached */

    VALUE scoreboard;              /* the Oribi::Scoreboard holding score (kept alive), else nil */
    struct oribi_score *score;     /* its row for this worker, which the loop counts in too, or NULL */
    struct oribi_score_head *head; /* what the workers share, or NULL once released */
    struct oribi_exchange *scored; /* the exchange whose request the scoreboard names, NULL when idle */

    uint64_t oob_gc;   /* out-of-band GC every this many requests, 0 off */
    uint64_t since_gc; /* requests taken since the last one */

    /* trusted_proxies: only their X-Request-Start counts (queue time) */
    struct oribi_net {
        unsigned char addr[16]; /* 4 bytes for IPv4 */
        int len, prefix;        /* address bytes, prefix bits */
    } trusted[ORIBI_MAX_TRUSTED];
    int ntrusted;
    /* remote_addr_header: REMOTE_ADDR from this field of a trusted peer's
     * requests; Qnil off */
    VALUE addr_header;
    VALUE url_scheme;   /* url_scheme (rack.url_scheme), Qnil: "http" */
    VALUE tls_contexts; /* the listeners' Oribi::TLSContext (or nil), held for their SSL_CTX */
    int64_t started_us; /* the server's start (wall clock): no X-Request-Start before it */
};

struct oribi_engine *oribi_engine_get(VALUE self); /* raises IOError once closed */

#endif
