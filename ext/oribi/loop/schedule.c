/*
 * The scheduler: the ready queue, in the order the clients came, and the
 * turn taken at every request handed out (kept-alive clients and the listen
 * backlog join it fairly), and the hold while every app thread is busy.
 */
#include "loop/internal.h"

#include "os/clock.h"

#define TURN_POLL_US 1000 /* kept-alive clients' requests join the queue this late at most */

void queue_ready(struct oribi_loop *loop, struct oribi_conn *c)
{
    timer_unlink(loop, c);
    c->state = CONN_READY;
    c->ready_at = oribi_mono_us();
    if (loop->queue_front) { /* from the backlog, its turn (take_turn) */
        c->qnext = loop->ready_head;
        loop->ready_head = c;
        if (!loop->ready_tail)
            loop->ready_tail = c;
        return;
    }
    c->qnext = NULL;
    if (loop->ready_tail)
        loop->ready_tail->qnext = c;
    else
        loop->ready_head = c;
    loop->ready_tail = c;
}

/* The scheduler, at every request handed out: one queue of clients in the
 * order they came. Kept-alive clients' requests join its tail when epoll
 * is asked (at most every TURN_POLL_US while there are such clients, so
 * that they join about when they came, at no cost to an app that answers
 * in microseconds). A worker with kept-alive clients, whose queue may never
 * empty, takes its turns at the backlog: a connection there has waited
 * since the backlog was first seen; once that is no later than the queue's
 * head, one is taken and served next. A burst of new connections goes
 * first so for a round of the kept-alive clients at most (one per client):
 * then the head goes, so that clients that keep connecting, which keep the
 * backlog from ever being empty, cannot starve the queue (a request whose
 * bytes came after its connect waited behind every new connection). One
 * per request handed out: the workers
 * take their share of a backlog at the rate they serve, and none hoards
 * connections it cannot serve soon; none takes one that a worker asleep
 * for it will (may_take). A worker without kept-alive clients takes new
 * connections once its queue is empty, as the first worker free: one it
 * took in turn would wait behind its queue while another worker may free
 * up first. Every time compared here is from the precise clock: a coarse
 * tick (4 ms) is longer than a request. Without a backlog or kept-alive
 * clients this costs nothing. */
static void take_turn(struct oribi_loop *loop)
{
    /* TIMER_HEAD: clients whose request is on its way (a new connection
     * whose bytes were not there yet when it was accepted). */
    int arriving = loop->backlog || loop->timers[TIMER_HEAD][0];
    if (!arriving && !loop->nidle)
        return;
    if (!arriving && oribi_mono_us() - loop->polled_at < TURN_POLL_US)
        return;
    loop->now = oribi_coarse_ms();
    end_pause(loop);
    /* Those just answered are watched first (one accepted with its request
     * complete never was); other conns (flushes, timers) every few turns. */
    int64_t before = loop->polled_at;
    if (loop->nidle || loop->timers[TIMER_HEAD][0] || ++loop->accept_run >= ACCEPT_RUN) {
        drain_pending(loop);
        poll_events(loop, 0);
    }
    /* Without a known backlog, look anyway (every TURN_POLL_US): with
     * EPOLLEXCLUSIVE only the worker a connection woke is told of it, and
     * a busy worker that never looked would leave the whole backlog to
     * that one. What it finds came after the last look. */
    int64_t since = loop->backlog ? loop->backlog_since : before;
    int64_t head_at = loop->ready_head ? loop->ready_head->ready_at : -1;
    if (!loop->nkept || !loop->accepting || !may_take(loop))
        return;
    if (head_at >= 0 && head_at < since) {
        loop->backlog_run = 0; /* the head goes first */
        return;
    }
    loop->queue_front = 1;
    int r = accept_any(loop);
    loop->queue_front = 0;
    if (r > 0 && ++loop->backlog_run >= loop->nkept) {
        loop->backlog_run = 0;
        loop->backlog_since = head_at >= 0 ? head_at + 1 : since; /* the head goes next */
    } else if (r > 0) {
        loop->backlog_since = since; /* the rest waited as long at most */
    } else if (r < 0) {
        loop->backlog = 0;
    }
}

void oribi_loop_hold(struct oribi_loop *loop, int hold)
{
    if (loop->hold == hold)
        return;
    loop->hold = hold;
    if (hold)
        set_accepting(loop, 0);
    else
        resume_accepting(loop);
}

struct oribi_conn *oribi_loop_take(struct oribi_loop *loop)
{
    if (over_budget(loop))
        return NULL; /* see oribi_loop_run */
    take_turn(loop);
    struct oribi_conn *c = loop->ready_head;
    if (!c)
        return NULL;
    loop->ready_head = c->qnext;
    if (!loop->ready_head)
        loop->ready_tail = NULL;
    c->qnext = NULL;
    c->state = CONN_APP;
    c->app_events = 0;
    loop->requests++;
    if (c->buf_moved) { /* the body grew the buffer: point the head at it again */
        c->req.headers = c->headers;
        c->req.num_headers = loop->opt.limits.max_headers;
        oribi_parse_request(c->buf, c->head_len, 0, &c->req, &loop->opt.limits);
        c->buf_moved = 0;
    }
    keepalive_decide(loop, c);
    return c;
}
