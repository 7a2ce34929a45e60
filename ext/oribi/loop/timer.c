/*
 * The conns' timers: the earliest deadline, and which ran out
 * (the loop acts on them: conn_timed_out).
 */
#include "loop/internal.h"

/* The earliest deadline of the conns' timers (ms), -1 none. */
int64_t timers_deadline(const struct oribi_loop *loop)
{
    int64_t first = -1;
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c = loop->timers[k][0];
        if (c && (first < 0 || c->deadline < first))
            first = c->deadline;
    }
    return first;
}

struct oribi_conn *timer_expired(struct oribi_loop *loop, int *kind)
{
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c = loop->timers[k][0];
        if (c && c->deadline <= loop->now) {
            timer_unlink(loop, c);
            *kind = k;
            return c;
        }
    }
    return NULL;
}
