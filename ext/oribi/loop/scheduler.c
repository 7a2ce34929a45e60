/*
 * The scheduler's policy, at every request handed out: one queue of
 * clients in the order they came. Kept-alive clients' requests join its
 * tail when the poller is asked (at most every SCHED_LOOK_US while there
 * are such clients, so that they join about when they came, at no cost to
 * an app that answers in microseconds). A worker with kept-alive clients,
 * whose queue may never empty, takes its turns at the backlog: a
 * connection there has waited since the backlog was first seen; once that
 * is no later than the queue's head, one is taken and served next. A burst
 * of new connections goes first so for a round of the kept-alive clients
 * at most (one per client): then the head goes, so that clients that keep
 * connecting, which keep the backlog from ever being empty, cannot starve
 * the queue (a request whose bytes came after its connect waited behind
 * every new connection). One per request handed out: the workers take
 * their share of a backlog at the rate they serve, and none hoards
 * connections it cannot serve soon; none takes one that a worker asleep
 * for it will (may_accept). A worker without kept-alive clients takes new
 * connections once its queue is empty, as the first worker free: one it
 * took in turn would wait behind its queue while another worker may free
 * up first. Every time here is from the precise clock: a coarse tick (4
 * ms) is longer than a request. Without a backlog or kept-alive clients
 * this costs nothing.
 */
#include "loop/scheduler.h"

#include <stddef.h>

void oribi_sched_queue(struct oribi_scheduler *s, struct oribi_conn *c, int64_t now_us)
{
    c->ready_at = now_us;
    if (s->in_turn) {
        c->qnext = s->head;
        s->head = c;
        if (!s->tail)
            s->tail = c;
        return;
    }
    c->qnext = NULL;
    if (s->tail)
        s->tail->qnext = c;
    else
        s->head = c;
    s->tail = c;
}

struct oribi_conn *oribi_sched_pop(struct oribi_scheduler *s)
{
    struct oribi_conn *c = s->head;
    if (!c)
        return NULL;
    s->head = c->qnext;
    if (!s->head)
        s->tail = NULL;
    c->qnext = NULL;
    return c;
}

void oribi_sched_backlog_seen(struct oribi_scheduler *s)
{
    if (!s->backlog) {
        s->backlog = 1;
        s->backlog_since = s->looked_at;
    }
}

void oribi_sched_backlog_empty(struct oribi_scheduler *s)
{
    s->backlog = 0;
}

void oribi_sched_looked(struct oribi_scheduler *s, int64_t woke_us)
{
    s->looked_at = woke_us;
    s->unlooked = 0;
}

enum oribi_sched_step oribi_sched_step(struct oribi_scheduler *s, unsigned idle, int heads, int64_t now_us)
{
    int arriving = s->backlog || heads;
    if (!arriving && (!idle || now_us - s->looked_at < SCHED_LOOK_US))
        return SCHED_HAND_OUT;
    s->looked_before = s->looked_at;
    /* Those just answered are looked at first (one accepted with its
     * request complete never was); other conns (flushes, timers) every few
     * turns. */
    return idle || heads || ++s->unlooked >= SCHED_LOOK_RUN ? SCHED_LOOK : SCHED_TURN;
}

/* A turn at the backlog, as decided before the accept and settled after it. */
struct turn {
    int64_t since;   /* how long the backlog's clients waited, at most (µs) */
    int64_t head_at; /* when the queue's head joined it, -1 empty */
};

/* After the step's look: 1 when one connection from the backlog goes next
 * (queued at the front), t filled for took; 0 when the queue's head goes. */
static int turn(struct oribi_scheduler *s, const struct oribi_sched_world *w, struct turn *t)
{
    /* Without a known backlog, look anyway (every SCHED_LOOK_US): with
     * EPOLLEXCLUSIVE only the worker a connection woke is told of it, and
     * a busy worker that never looked would leave the whole backlog to
     * that one. What it finds came after the look before. */
    t->since = s->backlog ? s->backlog_since : s->looked_before;
    t->head_at = s->head ? s->head->ready_at : -1;
    if (!*w->kept || !w->may_accept(w->ctx))
        return 0;
    if (t->head_at >= 0 && t->head_at < t->since) {
        s->backlog_run = 0; /* the head goes first */
        return 0;
    }
    return 1;
}

/* What the turn's accept gave: 1 a connection, 0 none, -1 the backlog is empty. */
static void took(struct oribi_scheduler *s, unsigned kept, const struct turn *t, int taken)
{
    if (taken > 0 && ++s->backlog_run >= kept) {
        s->backlog_run = 0;
        s->backlog_since = t->head_at >= 0 ? t->head_at + 1 : t->since; /* the head goes next */
    } else if (taken > 0) {
        s->backlog_since = t->since; /* the rest waited as long at most */
    } else if (taken < 0) {
        s->backlog = 0;
    }
}

struct oribi_conn *oribi_sched_next(struct oribi_scheduler *s, unsigned idle, int heads, int64_t now_us,
                                    const struct oribi_sched_world *w)
{
    enum oribi_sched_step step = oribi_sched_step(s, idle, heads, now_us);
    if (step != SCHED_HAND_OUT) {
        if (step == SCHED_LOOK)
            w->look(w->ctx);
        struct turn t;
        if (turn(s, w, &t)) {
            s->in_turn = 1;
            int taken = w->accept(w->ctx);
            s->in_turn = 0;
            took(s, *w->kept, &t, taken);
        }
    }
    return oribi_sched_pop(s);
}
