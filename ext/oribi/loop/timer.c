/*
 * The deadlines: how long epoll may sleep, and which conns' timers ran out
 * (the loop acts on them: conn_timed_out).
 */
#include "loop/internal.h"

/* The earlier of two deadlines (ms), -1 none. */
static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* The conns' timers', and each module's own: admission (a pause, standing
 * aside), the look at slow bodies (conn.c), shedding over the budgets
 * (accept.c). */
int next_timeout(struct oribi_loop *loop)
{
    int64_t first = -1;
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c = loop->timers[k][0];
        if (c)
            first = earliest(first, c->deadline);
    }
    first = earliest(first, oribi_admit_deadline(&loop->admit, loop->now));
    first = earliest(first, body_rates_deadline(loop));
    first = earliest(first, shed_deadline(loop));
    if (first < 0)
        return -1;
    int64_t d = first - loop->now;
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;
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
