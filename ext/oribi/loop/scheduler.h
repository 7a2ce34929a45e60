/*
 * The scheduler: which complete request a worker hands to the app next. One
 * queue of clients in the order they came, and the turns that the listen
 * backlog takes in it while the worker has kept-alive clients (whose queue
 * may never empty). A policy and nothing else: it owns no socket and reads
 * no clock. The loop tells it what happened (a request complete, a look at
 * the poller, a backlog seen or found empty, a connection taken) with the
 * precise time in µs, and asks it what to do before each hand-out
 * (oribi_loop_take): look at the poller, take one from the backlog, or
 * neither. test/unit/scheduler.c drives it with event sequences alone.
 */
#ifndef ORIBI_SCHEDULER_H
#define ORIBI_SCHEDULER_H

#include <stdint.h>

#include "loop/conn.h"

#define SCHED_LOOK_US  1000 /* kept-alive clients' requests join the queue this late at most */
#define SCHED_LOOK_RUN 8    /* hand-outs without a look at the other conns and the timers, at most */

struct oribi_scheduler {
    struct oribi_conn *head, *tail; /* the ready queue (conn->qnext) */
    int backlog;                    /* a listener was seen readable and not yet found empty */
    int64_t backlog_since;          /* µs: its clients' turn comes before requests queued since */
    unsigned backlog_run;           /* backlog connections served first since the queue's head last was */
    int64_t looked_at;              /* µs: the last look at the poller */
    int64_t looked_before;          /* µs: looked_at before this hand-out's look (oribi_sched_step) */
    unsigned unlooked;              /* turns since the last look */
    int in_turn;                    /* the backlog's turn is being taken: what joins the queue goes first */
};

/* What the loop does before a hand-out (oribi_sched_step). */
enum oribi_sched_step {
    SCHED_HAND_OUT, /* the queue's head goes: nothing can come before it */
    SCHED_TURN,     /* the backlog may have a turn (oribi_sched_turn) */
    SCHED_LOOK,     /* look at the poller without waiting first, then the same */
};

/* A complete request joins the queue: at its tail, in the order the
 * clients came, or at its head while the backlog's turn is taken (the
 * connection just accepted for it). */
void oribi_sched_queue(struct oribi_scheduler *s, struct oribi_conn *c, int64_t now_us);
struct oribi_conn *oribi_sched_pop(struct oribi_scheduler *s);

/* A listener was seen readable: connections may wait in the backlog since
 * the last look at the latest. */
void oribi_sched_backlog_seen(struct oribi_scheduler *s);
/* Every listener said it has none. */
void oribi_sched_backlog_empty(struct oribi_scheduler *s);
/* The poller was asked; woke_us is when its wait returned, before the
 * events it reported were handled. */
void oribi_sched_looked(struct oribi_scheduler *s, int64_t woke_us);

/* Before a hand-out. idle: kept-alive conns waiting for a next request
 * (their bytes join the queue when the poller is asked); heads: conns
 * whose request is on its way (accepted before their bytes came). */
enum oribi_sched_step oribi_sched_step(struct oribi_scheduler *s, unsigned idle, int heads, int64_t now_us);

/* What the scheduler asks of the loop while it decides a hand-out. */
struct oribi_sched_world {
    void *ctx;
    const unsigned *kept; /* kept-alive clients (a round of turns), read when a turn is weighed */
    /* Ask the poller without waiting; what it reports is handled
     * (oribi_sched_queue, oribi_sched_backlog_seen, oribi_sched_looked). */
    void (*look)(void *ctx);
    /* The listeners may be taken from now: room, no hold, no pause, within
     * its share (admission). */
    int (*may_accept)(void *ctx);
    /* One connection from the backlog, its request queued when complete:
     * 1 taken, 0 none, -1 the backlog is empty. */
    int (*accept)(void *ctx);
};

/* The next request for the app, NULL none: before it a look at the
 * poller, and a turn at the backlog, when due (oribi_sched_step, whose
 * arguments idle, heads and now_us are). The one call the loop makes
 * before a hand-out. */
struct oribi_conn *oribi_sched_next(struct oribi_scheduler *s, unsigned idle, int heads, int64_t now_us,
                                    const struct oribi_sched_world *w);

#endif
