/*
 * The loop itself: setting up and tearing down a worker's epoll set, one
 * epoll_wait and what it reported, oribi_loop_run, which ties accepts,
 * connections, timers and the scheduler together, and oribi_loop_take,
 * which does what the scheduler says before each hand-out. The rest of
 * loop/ has the pieces (internal.h).
 */
#include "loop/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/clock.h"

/* The master's view of this worker's connections (stats): two stores. */
static inline void publish(struct oribi_loop *loop)
{
    if (loop->score) {
        loop->score->conns = loop->nconns;
        loop->score->idle = loop->nidle;
    }
}

int oribi_loop_init(struct oribi_loop *loop, const struct oribi_options *opt, const struct oribi_listener *listeners,
                    int n)
{
    memset(loop, 0, sizeof(*loop));
    loop->opt = *opt;
    if (n > ORIBI_MAX_LISTENERS) {
        errno = EINVAL;
        return -1;
    }
    loop->pfd = loop->spare_fd = -1;
    loop->wake.rfd = loop->wake.wfd = -1;
    memcpy(loop->listeners, listeners, (size_t)n * sizeof(*listeners));
    /* Copies of its own: a draining worker serves the backlog after the
     * process has closed its listeners, and closes these once it is empty. */
    for (int i = 0; i < n; i++) {
        loop->listeners[i].owed = 0; /* the loop's own count, whatever the caller's struct held */
        loop->listeners[i].fd = fcntl(listeners[i].fd, F_DUPFD_CLOEXEC, 0);
        if (loop->listeners[i].fd < 0) {
            while (i--)
                close(loop->listeners[i].fd);
            return -1;
        }
    }
    loop->nlisteners = n;
    loop->listening = 1;
    /* accept4 must never block the loop: a listener inherited from
     * start_server or systemd comes blocking, and a connection epoll
     * announced may be taken by another process first. */
    for (int i = 0; i < n; i++) {
        int fl = fcntl(loop->listeners[i].fd, F_GETFL);
        if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(loop->listeners[i].fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
            close_listeners(loop, 0);
            return -1;
        }
    }
    loop->hot_listener = -1;
    loop->timeout_ms[TIMER_IDLE] = opt->keepalive_timeout_ms;
    loop->timeout_ms[TIMER_HEAD] = opt->header_timeout_ms;
    loop->timeout_ms[TIMER_BODY] = opt->body_timeout_ms;
    loop->timeout_ms[TIMER_WRITE] = opt->write_timeout_ms;
    loop->timeout_ms[TIMER_LINGER] = ORIBI_LINGER_MS;
    loop->budget.cap = opt->max_write_backlog;
    loop->budget.spool_cap = opt->max_worker_spool;
    loop->now = oribi_coarse_ms();
    loop->pfd = oribi_poller_open();
    loop->fields = calloc(opt->limits.max_headers ? opt->limits.max_headers : 1, sizeof(*loop->fields));
    if (!loop->fields || loop->pfd < 0 || oribi_wakeup_open(&loop->wake) < 0 ||
        oribi_poller_set(loop->pfd, loop->wake.rfd, (void *)TAG_WAKE, 0, ORIBI_POLL_IN) < 0) {
        int err = errno;
        oribi_loop_free(loop);
        errno = err;
        return -1;
    }
    spare_restore(loop); /* none is no error: EMFILE then pauses as it would */
    return 0;
}

void oribi_loop_free(struct oribi_loop *loop)
{
    for (int fd = 0; fd < loop->by_fd_cap; fd++)
        if (loop->by_fd[fd])
            conn_close(loop, loop->by_fd[fd]);
    while (loop->free_list) {
        struct oribi_conn *c = loop->free_list;
        loop->free_list = c->qnext;
        free(c->buf);
        free(c->wbuf);
        free(c);
    }
    free(loop->by_fd);
    loop->by_fd = NULL;
    free(loop->fields);
    loop->fields = NULL;
    free(loop->pending);
    loop->pending = NULL;
    loop->npending = loop->pending_cap = 0;
    cork_free(&loop->cork);
    close_listeners(loop, 0);
    if (loop->pfd >= 0)
        close(loop->pfd);
    oribi_wakeup_close(&loop->wake);
    if (loop->spare_fd >= 0)
        close(loop->spare_fd);
    loop->pfd = loop->spare_fd = -1;
}

void oribi_loop_wake(struct oribi_loop *loop)
{
    __atomic_store_n(&loop->wake_pending, 1, __ATOMIC_RELAXED);
    oribi_wakeup_send(&loop->wake);
}

/* Everything whose time has come: shedding over the write and spool
 * budgets, the look at slow bodies, the timers that ran out. */
static void expire_timers(struct oribi_loop *loop)
{
    if (over_budget(loop))
        shed_backlog(loop);
    if (spool_full(loop))
        shed_spooled(loop);
    if (loop->rate_check_at && loop->rate_check_at <= loop->now)
        conn_check_body_rates(loop);
    struct oribi_conn *c;
    int kind;
    while ((c = timer_expired(loop, &kind)))
        conn_timed_out(loop, c, kind);
}

/* The earlier of two deadlines (ms), -1 none. */
static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* How long the wait may sleep (ms, -1 forever, a minute at most): until
 * the first deadline of the conns' timers (timer.c), admission's (a
 * pause, standing aside), the look at slow bodies (conn.c), shedding over
 * the budgets (accept.c); each module says its own. */
static int next_timeout(struct oribi_loop *loop)
{
    int64_t first = timers_deadline(loop);
    first = earliest(first, oribi_admit_deadline(&loop->admit, loop->now));
    first = earliest(first, body_rates_deadline(loop));
    first = earliest(first, shed_deadline(loop));
    if (first < 0)
        return -1;
    int64_t d = first - loop->now;
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

/* One wait and what it reported, then the timers. Returns what the wait
 * returned (-1 with errno: nothing was done). */
int poll_events(struct oribi_loop *loop, int timeout)
{
    struct oribi_poll_batch batch;
    flush_corked(loop);
    update_listeners(loop); /* once a turn, before the wait */
    /* Asleep with the listeners on, it is the worker a new connection
     * wakes, and the one that takes it (ADMIT_WOKEN). */
    int waits = timeout != 0 && loop->accepting;
    if (waits)
        note_waiting(loop, 1);
    int n = 0, slept = 0;
    int64_t began = timeout != 0 && loop->opt.busy_poll_us ? oribi_mono_us() : 0;
    if (timeout != 0 && loop->spin.budget_us > 0) { /* busy_poll: spin.h */
        int64_t until = began + loop->spin.budget_us;
        while ((n = oribi_poller_wait(loop->pfd, &batch, 0)) == 0 && oribi_mono_us() < until)
            ;
    }
    if (n == 0) {
        n = oribi_poller_wait(loop->pfd, &batch, timeout < 0 ? -1 : (int64_t)timeout * 1000000);
        slept = timeout != 0;
    }
    if (waits)
        note_waiting(loop, 0);
    int64_t woke = oribi_mono_us();
    if (timeout != 0 && loop->opt.busy_poll_us)
        oribi_spin_waited(&loop->spin, woke - began, n > 0, loop->opt.busy_poll_us);
    loop->now = oribi_coarse_ms();
    loop->accept_run = 0;
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        void *p = oribi_poll_data(&batch, i);
        if (p == (void *)TAG_WAKE) {
            __atomic_store_n(&loop->wake_pending, 1, __ATOMIC_RELAXED);
        } else if (IS_TAG(p)) {
            /* Taken at once when nothing is ready; else in turns, as the
             * ready requests are handed out (oribi_loop_take). Left to a
             * worker asleep for it, unless this one was. */
            int li = (int)(((uintptr_t)p - 3) / 2);
            oribi_sched_backlog_seen(&loop->sched);
            /* the kernel woke this worker alone for it (where it wakes one:
             * kqueue wakes them all, and nothing is owed; and not one that
             * found it polling: the kernel went on to wake another) */
            if (ORIBI_POLL_EXCLUSIVE != 0 && waits && slept && loop->listeners[li].owed < OWED_MAX)
                loop->listeners[li].owed++;
            if (admit(loop, waits ? ADMIT_WOKEN : ADMIT_POLLED))
                accept_one(loop, li);
        } else {
            on_conn_event(loop, (struct oribi_conn *)p, oribi_poll_events(&batch, i));
        }
    }
    expire_timers(loop);
    oribi_sched_looked(&loop->sched, woke); /* after the events: a backlog seen dates from the look before */
    return n;
}

static int loop_run(struct oribi_loop *loop, int block);

int oribi_loop_run(struct oribi_loop *loop, int block)
{
    int r = loop_run(loop, block);
    if (r != LOOP_READY)
        flush_corked(loop); /* the Ruby side takes no request now */
    return r;
}

static int loop_run(struct oribi_loop *loop, int block)
{
    for (;;) {
        drain_pending(loop);
        /* Over max_write_backlog no request is handed out, so that no new
         * response adds to it, until shed_backlog or the clients bring it
         * down. */
        if (loop->sched.head && !loop->hold && !over_budget(loop)) {
            publish(loop);
            return LOOP_READY;
        }
        /* Relaxed: the flag orders nothing; what a waker hands over is
         * under its own lock (the handbacks, the GVL). */
        if (__atomic_load_n(&loop->wake_pending, __ATOMIC_RELAXED)) {
            oribi_wakeup_drain(&loop->wake);
            __atomic_store_n(&loop->wake_pending, 0, __ATOMIC_RELAXED);
            return LOOP_INTERRUPTED;
        }
        if (loop->draining && take_backlog(loop))
            continue;
        if (loop->stopping && !loop->draining && loop->nconns == 0)
            return LOOP_STOPPED;
        admit_turn(loop);
        if (block) {
            loop->now = oribi_coarse_ms(); /* the app may have run long since the last wakeup */
            admit_sleeps(loop);
        }
        if (!block && accept_direct(loop))
            continue;
        publish(loop);
        if (poll_events(loop, block ? next_timeout(loop) : 0) < 0) {
            /* A signal while sleeping: go back to Ruby so its handler runs
             * (Ruby does not always route the wakeup through our ubf). */
            if (errno == EINTR && !block)
                continue;
            return LOOP_INTERRUPTED;
        }
        if (!block && (!loop->sched.head || loop->hold || over_budget(loop)))
            return LOOP_IDLE;
    }
}

/* What the scheduler asks of the loop before a hand-out (scheduler.h). */
static void sched_look(void *ctx)
{
    struct oribi_loop *loop = ctx;
    loop->now = oribi_coarse_ms();
    poll_events(loop, 0);
}

static int sched_may_accept(void *ctx)
{
    struct oribi_loop *loop = ctx;
    loop->now = oribi_coarse_ms();
    return admit(loop, ADMIT_TURN);
}

static int sched_accept(void *ctx)
{
    return accept_any(ctx);
}

const struct oribi_options *oribi_loop_options(const struct oribi_loop *loop)
{
    return &loop->opt;
}

int oribi_loop_stopping(const struct oribi_loop *loop)
{
    return loop->stopping;
}

void oribi_loop_share(struct oribi_loop *loop, struct oribi_score *score, struct oribi_score_head *head)
{
    loop->score = score;
    loop->shared = head;
}

void oribi_loop_hold(struct oribi_loop *loop, int hold)
{
    loop->hold = hold; /* the listeners follow at the next wait (update_listeners) */
}

struct oribi_conn *oribi_loop_take(struct oribi_loop *loop)
{
    if (over_budget(loop))
        return NULL; /* see oribi_loop_run */
    /* A pipelined request behind the last response is parsed first: until
     * then its conn waits on the head timer, like a client whose bytes are
     * still coming, and would make every hand-out a look at the poller. */
    drain_pending(loop);
    const struct oribi_sched_world w = {loop, &loop->nkept, sched_look, sched_may_accept, sched_accept};
    struct oribi_conn *c =
        oribi_sched_next(&loop->sched, loop->nidle, loop->timers[TIMER_HEAD][0] != NULL, oribi_mono_us(), &w);
    if (!c)
        return NULL;
    c->state = CONN_APP;
    c->app_events = 0;
    loop->requests++;
    cork_take(loop, c);
    return c;
}

void oribi_loop_stop(struct oribi_loop *loop, long drain)
{
    if (loop->stopping) {
        if (!drain)
            close_listeners(loop, 1); /* e.g. retired (max_requests) while draining */
        return;
    }
    loop->stopping = 1;
    oribi_admit_stop(&loop->admit);
    /* Connections in the backlog were accepted by the kernel and have sent
     * their request: they are in flight, and served before the listeners
     * close (take_backlog). Not taken all at once here: a worker busy in
     * the app would hold them while the others sit idle. */
    if (drain) {
        loop->draining = 1;
        loop->drain_left = drain;
    } else {
        close_listeners(loop, 1);
    }
    /* Idle keep-alive connections are not cut at once: a client may be
     * sending its next request right now, and a close racing it is a failed
     * request. For a short grace each one's next request is still answered
     * (with connection: close); the ones that stay silent are closed then. */
    if (loop->timeout_ms[TIMER_IDLE] > ORIBI_DRAIN_IDLE_MS)
        loop->timeout_ms[TIMER_IDLE] = ORIBI_DRAIN_IDLE_MS;
    /* Nor is a head still coming a request in flight: it gets the same
     * grace (the rest of a head split over segments is on its way), then
     * its 408, instead of a header_timeout that would outlast the drain. */
    if (loop->timeout_ms[TIMER_HEAD] > ORIBI_DRAIN_IDLE_MS)
        loop->timeout_ms[TIMER_HEAD] = ORIBI_DRAIN_IDLE_MS;
    for (int fd = 0; fd < loop->by_fd_cap; fd++) {
        struct oribi_conn *c = loop->by_fd[fd];
        if (c && c->state == CONN_HEAD)
            timer_arm(loop, c, c->len == 0 ? TIMER_IDLE : TIMER_HEAD);
    }
}
