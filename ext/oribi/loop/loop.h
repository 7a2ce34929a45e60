/*
 * The worker's connection loop: the only place that owns sockets and time.
 * It accepts, reads and parses until a request is complete (head and body)
 * without Ruby, queues it for the app, and finishes the connection after the
 * response: keep-alive, pipelining, timeouts, lingering close.
 * Everything here runs without the GVL unless stated otherwise.
 */
#ifndef ORIBI_LOOP_H
#define ORIBI_LOOP_H

#include <stdint.h>
#include <sys/uio.h>

#include "os/clock.h"
#include "os/wakeup.h"
#include "loop/admission.h"
#include "loop/conn.h"
#include "loop/cork.h"
#include "loop/log.h"
#include "loop/pending.h"
#include "loop/output.h"
#include "http/parser.h"
#include "http/response.h"
#include "loop/scheduler.h"
#include "loop/score.h"
#include "loop/spin.h"

#define ORIBI_MAX_LISTENERS 64

/* Not options: the options' defaults live in lib/oribi/options.rb, and
 * struct oribi_options is always filled from there (Engine.new). */
#define ORIBI_LINGER_MS          2000
#define ORIBI_DRAIN_IDLE_MS      1000 /* idle keep-alive grace when draining */
#define SHED_STALL_MS            250  /* over max_write_backlog, a client that read nothing this long is dropped */
#define ORIBI_BODY_PROGRESS      8192 /* bytes that re-arm the body timer */
#define ORIBI_BODY_RATE_GRACE_MS 5000 /* a body below min_body_rate is cut only after this */
#define ORIBI_BODY_RATE_CHECK_MS 1000 /* how often bodies in progress are held to min_body_rate */

struct oribi_options {
    struct oribi_limits limits;
    int keepalive; /* 0: Connection: close on every response */
    unsigned keepalive_requests;
    int64_t keepalive_timeout_ms;
    int64_t header_timeout_ms;
    int64_t body_timeout_ms;
    int64_t write_timeout_ms;
    int64_t max_body;   /* 0: no limit */
    size_t body_buffer; /* bodies above this spill to a tmpfile */
    unsigned max_connections;
    size_t max_write_backlog;   /* kept output bytes past which stalled clients are dropped; 0: no cap */
    int64_t max_response_spool; /* bytes of one response spooled for a slow client; 0: never spool */
    size_t max_worker_spool;    /* bytes of all responses spooled at once; 0: no cap */
    int64_t min_body_rate;      /* body bytes per second on average after the grace; 0: no minimum */
    int64_t busy_poll_us;       /* a wait polls this long at most before it sleeps (spin.h); 0: never */
    int share_accepts;          /* other workers take from the same listeners */
    const char *tmpdir;
};

struct ssl_ctx_st;

struct oribi_listener {
    int fd;
    int is_unix;
    int proxy;              /* PROXY protocol versions its connections must open with (ORIBI_PROXY_V*), 0 none */
    struct ssl_ctx_st *tls; /* its connections speak TLS with these settings (tls.h), else NULL */
    /* Wake-ups for it this worker took from the poller asleep and has not
     * answered with an accept: under EPOLLEXCLUSIVE no other worker was
     * woken for those connections (close_listeners hands them over). */
    unsigned owed;
};

/* The loop's state, by the file that owns each part (the others read it). */
struct oribi_loop {
    /* the wait, the hand-out, the stop (loop.c) */
    int pfd;                      /* the poller (os/poller.h) */
    struct oribi_wakeup wake;     /* interrupts the wait from any thread */
    int wake_pending;             /* atomic: set by app threads and signal handlers too */
    struct oribi_options opt;     /* as made (oribi_loop_init), read by all */
    struct oribi_spin spin;       /* how long a wait polls before it sleeps (spin.h) */
    struct oribi_scheduler sched; /* the ready queue and the backlog's turns (scheduler.h) */
    int hold;                     /* every app thread busy: no accepts, no hand-outs */
    uint64_t requests;            /* requests handed to the app */
    int stopping;                 /* graceful drain: no keep-alive, then no accepts */

    /* taking connections (accept.c, admission.h, spare.c) */
    struct oribi_listener listeners[ORIBI_MAX_LISTENERS];
    int nlisteners;
    int listening;                    /* listeners[] are open (the loop's own copies) */
    int accepting;                    /* listeners are in the poller: update_listeners alone sets it */
    int hot_listener;                 /* its last accept4 got a connection: try it first, -1 none */
    int accept_run;                   /* accepts straight from hot_listener since the last epoll_wait */
    struct oribi_admission admit;     /* whether to take a connection now */
    int draining;                     /* stopping, but the backlog is still served */
    long drain_left;                  /* connections it may still take while draining, -1 no bound */
    int spare_fd;                     /* held for an accept when out of fds (EMFILE), -1 none */
    struct oribi_tally shed;          /* conns closed to make room for new ones (max_connections) */
    struct oribi_tally shed_fds;      /* ... for want of a file descriptor (RLIMIT_NOFILE) */
    struct oribi_tally dropped;       /* clients dropped for reading nothing (max_write_backlog) */
    struct oribi_tally dropped_spool; /* ... whose spooled responses filled max_worker_spool */

    /* time (timer.c) */
    int64_t now;                               /* ms, CLOCK_MONOTONIC_COARSE, refreshed per wakeup */
    struct oribi_conn *timers[TIMER_KINDS][2]; /* head, tail of each FIFO */
    int64_t timeout_ms[TIMER_KINDS];

    /* the connections (conn.c, cork.h) */
    struct oribi_conn **by_fd; /* conn of each fd, for tokens */
    int by_fd_cap;
    unsigned nconns;
    unsigned nidle; /* conns waiting for a next request (on the idle timer) */
    unsigned nkept; /* conns kept alive after a response: its kept-alive clients */
    struct oribi_conn *free_list;
    struct oribi_header *fields;   /* max_headers: where a head is parsed (conn.h, fields) */
    struct oribi_pending *pending; /* responses done: look at the conn again */
    int npending, pending_cap;
    struct oribi_cork cork;           /* pipelined responses held back */
    struct oribi_date_cache date;     /* for the answers the loop gives itself */
    uint64_t rejected;                /* requests answered with an error by the loop */
    int64_t rate_check_at;            /* next look at the bodies in progress (ms), 0 none due */
    struct oribi_tally slow_bodies;   /* bodies cut for coming slower than min_body_rate */
    struct oribi_tally no_proxy;      /* connections closed on a proxy_protocol listener: no valid PROXY header */
    struct oribi_write_budget budget; /* output kept across the conns (max_write_backlog; output.h) */
    struct oribi_score *score;        /* where the conn counts are published, or NULL */
    struct oribi_score_head *shared;  /* what the workers share (score.h), with score, or NULL */
};

enum { LOOP_READY = 1, LOOP_INTERRUPTED = 2, LOOP_STOPPED = 3, LOOP_IDLE = 4 };

/* Sets up epoll and the wake fd, and takes its own copies of the listeners
 * (closed by oribi_loop_stop or oribi_loop_free, whatever the caller does
 * with its own). Returns 0 or -1 with errno. */
int oribi_loop_init(struct oribi_loop *loop, const struct oribi_options *opt, const struct oribi_listener *listeners,
                    int n);
void oribi_loop_free(struct oribi_loop *loop);

/* Runs until a request is complete (LOOP_READY: take it with
 * oribi_loop_take), the loop is woken (LOOP_INTERRUPTED), or a stopping loop
 * has no connections left (LOOP_STOPPED). With block == 0 it handles what
 * is ready now and returns LOOP_IDLE instead of waiting: the caller can
 * keep the GVL while there is work, and release it only to sleep. */
int oribi_loop_run(struct oribi_loop *loop, int block);
struct oribi_conn *oribi_loop_take(struct oribi_loop *loop);

/* The options it was made with. */
const struct oribi_options *oribi_loop_options(const struct oribi_loop *loop);

/* A stop began (oribi_loop_stop): responses from now on close their
 * connections. */
int oribi_loop_stopping(const struct oribi_loop *loop);

/* Where the loop publishes its counts (score), and what the workers
 * share, which admission reads (head; NULL: this worker alone). */
void oribi_loop_share(struct oribi_loop *loop, struct oribi_score *score, struct oribi_score_head *head);

/* hold 1: oribi_loop_run serves its conns but accepts none and returns no
 * LOOP_READY (the app has no thread free); hold 0 undoes it. */
void oribi_loop_hold(struct oribi_loop *loop, int hold);

/* Thread-safe: the conn's fd leaves the epoll set (hijack, from an app
 * thread; oribi_loop_detach follows on the loop's thread). */
void oribi_loop_unwatch(struct oribi_loop *loop, struct oribi_conn *c);

/* Thread- and signal-safe: makes oribi_loop_run return LOOP_INTERRUPTED. */
void oribi_loop_wake(struct oribi_loop *loop);

/* Graceful drain: in-flight requests finish with close, idle connections
 * get a short grace. With drain != 0 the loop goes on taking connections
 * from the listeners as usual (when a thread is free, so that the workers
 * share the backlog) until it finds them empty or took drain of them (the
 * backlog when the stop began: clients that keep connecting, through a
 * proxy say, cannot keep it going; -1: no bound), and closes them then;
 * with 0 it closes them at once (the backlog is someone else's). */
void oribi_loop_stop(struct oribi_loop *loop, long drain);

/* The app is done with the conn: keep it alive (c->keepalive) or close it,
 * and read on. */
void oribi_loop_finish(struct oribi_loop *loop, struct oribi_conn *c);

/* The app took the connection (hijack): the loop forgets it without
 * closing its fd, which is returned. Kept output must be flushed first;
 * unread input at c->buf + c->rest_off is the caller's to hand over first. */
int oribi_loop_detach(struct oribi_loop *loop, struct oribi_conn *c);

/* Hands the body tmpfile to the caller (it closes it); -1 when in memory. */
int oribi_conn_take_body_fd(struct oribi_conn *c);

#endif
