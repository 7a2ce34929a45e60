/*
 * Timers: one FIFO per kind; all entries of a kind share one duration, so
 * appending keeps each list sorted by deadline. Arming and unlinking are on
 * every request's path: inline.
 */
#ifndef ORIBI_TIMER_H
#define ORIBI_TIMER_H

#include "loop/loop.h"

static inline void timer_unlink(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->timer == TIMER_NONE)
        return;
    if (c->timer == TIMER_IDLE)
        loop->nidle--;
    struct oribi_conn **list = loop->timers[c->timer];
    if (c->tprev)
        c->tprev->tnext = c->tnext;
    else
        list[0] = c->tnext;
    if (c->tnext)
        c->tnext->tprev = c->tprev;
    else
        list[1] = c->tprev;
    c->tprev = c->tnext = NULL;
    c->timer = TIMER_NONE;
}

static inline void timer_arm(struct oribi_loop *loop, struct oribi_conn *c, int kind)
{
    timer_unlink(loop, c);
    struct oribi_conn **list = loop->timers[kind];
    c->timer = (unsigned char)kind;
    if (kind == TIMER_IDLE)
        loop->nidle++;
    c->deadline = loop->now + loop->timeout_ms[kind];
    c->tprev = list[1];
    c->tnext = NULL;
    if (list[1])
        list[1]->tnext = c;
    else
        list[0] = c;
    list[1] = c;
}

/* The earliest deadline of the conns' timers (ms), -1 none. */
int64_t timers_deadline(const struct oribi_loop *loop);

/* A conn whose deadline has come, taken off its list (its kind in *kind),
 * or NULL: the first of the earliest kind first. */
struct oribi_conn *timer_expired(struct oribi_loop *loop, int *kind);

#endif
