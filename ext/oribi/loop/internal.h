/*
 * What the files of the worker's loop share and nothing else sees: the
 * loop itself (loop.c: init, the wait, run, the hand-out, the stop),
 * accepting, shedding and the drain (accept.c), a connection's life
 * (conn.c), the cork (cork.{c,h}), the spare fd (spare.c), the timers
 * (timer.{c,h}); the scheduler (scheduler.{c,h}) and admission
 * (admission.{c,h}) are policies of their own that the loop asks. The
 * calls point one way, down that list: loop.c asks the others, and hands
 * the timers that ran out to conn.c; accept.c takes conns (conn.c); the
 * rest call up to none of them. Every function here runs on the
 * loop's thread.
 */
#ifndef ORIBI_LOOP_INTERNAL_H
#define ORIBI_LOOP_INTERNAL_H

#include <stdint.h>

#include "loop/loop.h"
#include "loop/timer.h"
#include "os/poller.h"
#include "os/socket.h"

#define SHED_LOG_MS 10000 /* the line saying connections are shed, at most this often */
#define ACCEPT_RUN  8     /* accepts without a wait, at most */

/* A connection in the poller: edge-triggered, so an idle connection costs
 * nothing until bytes arrive and a conn the app holds does not wake the
 * loop; told of the peer's FIN. */
#define CONN_EVENTS (ORIBI_POLL_IN | ORIBI_POLL_OUT | ORIBI_POLL_HUP | ORIBI_POLL_EDGE)

/* Poller data for non-conn fds: a conn pointer is always even-aligned, so
 * small integers cannot collide with one. */
#define TAG_WAKE        ((uintptr_t)1)
#define TAG_LISTENER(i) ((uintptr_t)(3 + 2 * (i)))
#define IS_TAG(p)       (((uintptr_t)(p)) & 1)

static inline int over_budget(const struct oribi_loop *loop)
{
    return loop->budget.cap && __atomic_load_n(&loop->budget.kept, __ATOMIC_RELAXED) > loop->budget.cap;
}

/* The spool budget is full, or nearly: an app thread may be waiting for
 * room that only the loop's conns can give back (shed_spooled). */
static inline int spool_full(const struct oribi_loop *loop)
{
    return loop->budget.spool_cap &&
           __atomic_load_n(&loop->budget.spooled, __ATOMIC_RELAXED) > loop->budget.spool_cap / 4 * 3;
}

/* The keep-alive rule, the one place it is written: the connection may
 * carry another request after this one when the request allows it (its
 * version and Connection field), keep-alive is on, no stop has begun and
 * the connection has requests left (keepalive_requests). Decided when a
 * request is handed out, or answered by the loop (417); from then on only
 * lowered (oribi_conn_no_keepalive), never raised. */
static inline int keepalive_decide(const struct oribi_loop *loop, struct oribi_conn *c)
{
    c->keepalive = c->req.keepalive && loop->opt.keepalive && !loop->stopping &&
                   !(loop->opt.keepalive_requests && c->requests + 1 >= loop->opt.keepalive_requests);
    return c->keepalive;
}

/* loop.c */
int poll_events(struct oribi_loop *loop, int timeout);

/* conn.c */
struct oribi_conn *conn_new(struct oribi_loop *loop, int fd);
void conn_close(struct oribi_loop *loop, struct oribi_conn *c);
void conn_reject(struct oribi_loop *loop, struct oribi_conn *c, int status);
void conn_read(struct oribi_loop *loop, struct oribi_conn *c);
void drain_pending(struct oribi_loop *loop);
void on_conn_event(struct oribi_loop *loop, struct oribi_conn *c, uint32_t events);
void conn_timed_out(struct oribi_loop *loop, struct oribi_conn *c, int kind);
void conn_check_body_rates(struct oribi_loop *loop);
int64_t body_rates_deadline(const struct oribi_loop *loop); /* the next look at slow bodies (ms), -1 none */

/* spare.c */
void spare_restore(struct oribi_loop *loop);
int spare_spend(struct oribi_loop *loop);

/* accept.c */
#define OWED_MAX 64 /* wake-ups a listener may owe: what a stop takes at most */
int admit(struct oribi_loop *loop, enum oribi_admit_at at);
void admit_turn(struct oribi_loop *loop);
void admit_sleeps(struct oribi_loop *loop);
void update_listeners(struct oribi_loop *loop);
void close_listeners(struct oribi_loop *loop, int hand_over);
void note_waiting(struct oribi_loop *loop, int on);
int accept_one(struct oribi_loop *loop, int li);
int accept_direct(struct oribi_loop *loop);
int accept_any(struct oribi_loop *loop);
int take_backlog(struct oribi_loop *loop);
int64_t shed_deadline(const struct oribi_loop *loop);
void shed_backlog(struct oribi_loop *loop);
void shed_spooled(struct oribi_loop *loop);

#endif
