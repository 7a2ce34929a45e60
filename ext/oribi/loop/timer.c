/*
 * The deadlines: how long epoll may sleep, and what happens when a timer
 * runs out (close, or 408 for a request caught mid-way), plus the periodic
 * look at bodies slower than min_body_rate.
 */
#include "loop/internal.h"

#include "os/clock.h"
#include "loop/log.h"

int next_timeout(struct oribi_loop *loop)
{
    int64_t first = -1;
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c = loop->timers[k][0];
        if (c && (first < 0 || c->deadline < first))
            first = c->deadline;
    }
    if (loop->accept_resume_at && (first < 0 || loop->accept_resume_at < first))
        first = loop->accept_resume_at;
    if (loop->rate_check_at && (first < 0 || loop->rate_check_at < first))
        first = loop->rate_check_at;
    if (loop->aside_until && (first < 0 || loop->now + 1 < first))
        first = loop->now + 1; /* stand_back, ASIDE_US: a millisecond */
    if ((over_budget(loop) || spool_full(loop)) && (first < 0 || loop->now + SHED_STALL_MS < first))
        first = loop->now + SHED_STALL_MS; /* shed_backlog, shed_spooled look again then */
    if (first < 0)
        return -1;
    int64_t d = first - loop->now;
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

/* Bodies that came slower than min_body_rate on average since they began,
 * once past the grace, get 408 and a close: a connection past its head is
 * never shed, so clients trickling bodies just above what body_timeout
 * catches (8 KiB per timeout) could otherwise hold every connection ("slow
 * POST"). Every body in progress is on the body timer list. */
static void check_body_rates(struct oribi_loop *loop)
{
    loop->rate_check_at = 0;
    uint64_t cut = 0;
    struct oribi_conn *c = loop->timers[TIMER_BODY][0], *next;
    for (; c; c = next) {
        next = c->tnext;
        int64_t elapsed = loop->now - c->body_start;
        if (c->state != CONN_BODY || elapsed < ORIBI_BODY_RATE_GRACE_MS ||
            c->body_total >= loop->opt.min_body_rate * elapsed / 1000)
            continue;
        conn_reject(loop, c, 408);
        cut++;
    }
    loop->slow_bodies.count += cut;
    uint64_t n = tally_due(&loop->slow_bodies, loop->now, SHED_LOG_MS);
    if (n)
        oribi_log("answered 408 to %llu request(s) whose body came slower than min_body_rate (%lld bytes/s)",
                  (unsigned long long)n, (long long)loop->opt.min_body_rate);
    if (loop->timers[TIMER_BODY][0])
        loop->rate_check_at = loop->now + ORIBI_BODY_RATE_CHECK_MS;
}

void expire_timers(struct oribi_loop *loop)
{
    if (over_budget(loop))
        shed_backlog(loop);
    if (spool_full(loop))
        shed_spooled(loop);
    if (loop->rate_check_at && loop->rate_check_at <= loop->now)
        check_body_rates(loop);
    for (int k = 1; k < TIMER_KINDS; k++) {
        struct oribi_conn *c;
        while ((c = loop->timers[k][0]) && c->deadline <= loop->now) {
            timer_unlink(loop, c);
            /* Silence for a connection that never sent a byte; 408 for one
             * caught mid-request (slowloris); plain close otherwise. */
            if ((k == TIMER_HEAD && c->len > 0) || k == TIMER_BODY)
                conn_reject(loop, c, 408);
            else
                conn_close(loop, c);
        }
    }
    end_pause(loop);
}
