/*
 * The deadlines: how long epoll may sleep, and which conns' timers ran out
 * (the loop acts on them: conn_timed_out).
 */
#include "loop/internal.h"

int next_timeout(struct oribi_loop *loop)
{
    int64_t first = -1;
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c = loop->timers[k][0];
        if (c && (first < 0 || c->deadline < first))
            first = c->deadline;
    }
    int64_t admit_at = oribi_admit_deadline(&loop->admit, loop->now);
    if (admit_at >= 0 && (first < 0 || admit_at < first))
        first = admit_at;
    if (loop->rate_check_at && (first < 0 || loop->rate_check_at < first))
        first = loop->rate_check_at;
    if ((over_budget(loop) || spool_full(loop)) && (first < 0 || loop->now + SHED_STALL_MS < first))
        first = loop->now + SHED_STALL_MS; /* shed_backlog, shed_spooled look again then */
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
