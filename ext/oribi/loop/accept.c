/*
 * Taking connections: the listeners in the poller or not (one place,
 * update_listeners), accept (straight from a busy listener, or when epoll
 * says), shedding (idle connections for new ones at max_connections,
 * stalled readers over max_write_backlog) and the graceful drain of the
 * backlog on a stop. Whether a connection may be taken now is admission's
 * (admission.h), asked through admit with what the loop holds.
 */
#include "loop/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "os/clock.h"
#include "loop/log.h"
#include "loop/tls.h"

static void set_accepting(struct oribi_loop *loop, int on)
{
    if (loop->accepting == on)
        return;
    for (int i = 0; i < loop->nlisteners; i++) {
        /* EPOLLEXCLUSIVE: one waiting worker wakes per connection; a worker
         * busy in the app is not waiting, so it takes none it cannot serve. */
        unsigned mask = ORIBI_POLL_IN | ORIBI_POLL_EXCLUSIVE;
        oribi_poller_set(loop->pfd, loop->listeners[i].fd, (void *)TAG_LISTENER(i), on ? 0 : mask, on ? mask : 0);
    }
    loop->accepting = on;
}

/* The loop sleeps in the poller with its listeners on (on 1), or woke up
 * (on 0): counted among the workers waiting for connections. */
void note_waiting(struct oribi_loop *loop, int on)
{
    if (!loop->shared)
        return;
    if (on) {
        /* The row first, so that the master's release never takes back
         * more than was counted. */
        __atomic_store_n(&loop->score->waiting, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&loop->shared->waiting, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_sub_fetch(&loop->shared->waiting, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&loop->score->waiting, 0, __ATOMIC_RELAXED);
    }
}

/* Which conn a full worker closes to take a new one: the one that has
 * waited longest for a request of its own, between requests (keep-alive)
 * or in the middle of a head (a silent one included). Each list is in the
 * order its conns were armed, so the older of the two heads is the oldest.
 * Never a conn past its head (a body on its way, a request queued or in
 * the app, a response being written): its client has committed a request
 * and the server owes it an answer; closing it would cost a request, not
 * a reconnect, and would let a flood of connects cancel work in flight. */
static struct oribi_conn *shed_candidate(const struct oribi_loop *loop)
{
    struct oribi_conn *idle = loop->timers[TIMER_IDLE][0], *head = loop->timers[TIMER_HEAD][0];
    if (!idle || !head)
        return idle ? idle : head;
    int64_t idle_since = idle->deadline - loop->timeout_ms[TIMER_IDLE];
    return idle_since <= head->deadline - loop->timeout_ms[TIMER_HEAD] ? idle : head;
}

/* Room for one more connection, if need be by shedding one. */
static int has_room(const struct oribi_loop *loop)
{
    return loop->nconns < loop->opt.max_connections || shed_candidate(loop);
}

/* A new connection took the place of the oldest that was not sending a
 * request, for want of a slot (max_connections) or of a file descriptor
 * (fds): said in the log at once, then at most every SHED_LOG_MS with the
 * count since. */
static void shed_one(struct oribi_loop *loop, int fds)
{
    struct oribi_conn *c = shed_candidate(loop);
    if (!c)
        return;
    /* An event for it may still be in this epoll batch and reach the
     * conn that reuses its struct: at worst one read that finds nothing. */
    conn_close(loop, c);
    struct oribi_tally *t = fds ? &loop->shed_fds : &loop->shed;
    t->count++;
    int first = t->told == 0;
    uint64_t n = oribi_tally_due(t, loop->now, SHED_LOG_MS);
    if (!n)
        return;
    const char *since = first ? "" : " since the last such line";
    if (fds) {
        struct rlimit rl = {0, 0};
        getrlimit(RLIMIT_NOFILE, &rl);
        oribi_log("out of file descriptors (RLIMIT_NOFILE %llu, %u connections): closed %llu idle or incomplete "
                  "connection(s) to take new ones%s",
                  (unsigned long long)rl.rlim_cur, loop->nconns, (unsigned long long)n, since);
    } else {
        oribi_log("max_connections (%u) reached: closed %llu idle or incomplete connection(s) to take new ones%s",
                  loop->opt.max_connections, (unsigned long long)n, since);
    }
}

/* What admission reads of the loop. The precise clock only where
 * admission reads it (standing aside): not a clock read per hand-out. */
static struct oribi_admit_view view(const struct oribi_loop *loop, int precise)
{
    return (struct oribi_admit_view){.shared = loop->shared,
                                     .listening = loop->listening && (!loop->stopping || loop->draining),
                                     .hold = loop->hold,
                                     .room = has_room(loop),
                                     .queued = loop->sched.head != NULL,
                                     .nconns = loop->nconns,
                                     .nkept = loop->nkept,
                                     .now_ms = loop->now,
                                     .now_us = precise ? oribi_mono_us() : 0};
}

int admit(struct oribi_loop *loop, enum oribi_admit_at at)
{
    struct oribi_admit_view v = view(loop, at == ADMIT_WOKEN);
    return oribi_admit(&loop->admit, &v, at);
}

void admit_turn(struct oribi_loop *loop)
{
    if (!oribi_admit_aside(&loop->admit))
        return; /* the turn changes nothing else: no view to build */
    struct oribi_admit_view v = view(loop, 1);
    oribi_admit_turn(&loop->admit, &v);
}

void admit_sleeps(struct oribi_loop *loop)
{
    struct oribi_admit_view v = view(loop, 0);
    oribi_admit_sleeps(&loop->admit, &v);
}

/* The one place the listeners enter or leave the poller, once per loop
 * turn before the wait (poll_events), as admission says; the rest of the
 * loop only changes what it reads. Level-triggered, listeners left in
 * while the worker may not take would wake it again at once; and over its
 * share it goes behind the other workers by going out and in again. */
void update_listeners(struct oribi_loop *loop)
{
    struct oribi_admit_view v = view(loop, 0);
    int requeue, on = oribi_admit_listen(&loop->admit, &v, &requeue);
    if (requeue)
        set_accepting(loop, 0);
    set_accepting(loop, on);
}

/* The listeners leave the poller and close: found empty when draining,
 * the drain's share taken, a stop without a drain, the loop freed. On a
 * stop (hand_over), out of the poller first, then a connection taken for
 * each wake-up this worker owes: EPOLLEXCLUSIVE woke it alone for those,
 * and a worker still listening is never told of them (it would sleep
 * beside a client in the backlog until another connection woke it). What
 * comes after the poller let go wakes the others. */
void close_listeners(struct oribi_loop *loop, int hand_over)
{
    int open = loop->listening;
    loop->listening = 0;
    loop->draining = 0; /* accept_one below must not close them again */
    update_listeners(loop);
    for (int i = 0; open && hand_over && i < loop->nlisteners; i++)
        while (loop->listeners[i].owed > 0 && accept_one(loop, i) == 0)
            ;
    if (open)
        for (int i = 0; i < loop->nlisteners; i++) {
            close(loop->listeners[i].fd);
            loop->listeners[i].owed = 0;
        }
    loop->hot_listener = -1;
}

/* Accepts one connection and reads it at once: with TCP_DEFER_ACCEPT the
 * request is usually there, so a connection-per-request client costs
 * accept4 + read + sendmsg + close and never touches epoll_ctl. A request
 * found complete joins the ready queue. */
int accept_one(struct oribi_loop *loop, int li)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = oribi_accept(loop->listeners[li].fd, (struct sockaddr *)&ss, &sl);
    int fds_short = 0;
    if (fd < 0 && errno == EMFILE && loop->spare_fd < 0 && shed_candidate(loop)) {
        /* The spare went to a twin (spare_spend) and no close brought it
         * back: a shed does, and leaves room for this accept too. */
        shed_one(loop, 1);
        spare_restore(loop);
        sl = sizeof(ss);
        fd = oribi_accept(loop->listeners[li].fd, (struct sockaddr *)&ss, &sl);
    }
    if (fd < 0 && errno == EMFILE && loop->spare_fd >= 0 && shed_candidate(loop)) {
        /* Out of fds while holding a connection it may shed: the spare
         * makes room for the accept, the shed (below) for the spare. A
         * client behind idle ones is served, not left in the backlog until
         * a header or keep-alive timeout frees an fd. */
        spare_spend(loop);
        sl = sizeof(ss);
        fd = oribi_accept(loop->listeners[li].fd, (struct sockaddr *)&ss, &sl);
        fds_short = fd >= 0;
        if (fd < 0) {
            int err = errno;
            spare_restore(loop);
            errno = err;
        }
    }
    if (fd < 0) {
        /* Out of fds with none to shed (or the spare gone): a pause, and
         * the backlog's clients wait for a close here or another worker. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            oribi_admit_pause(&loop->admit, loop->now);
        return -1;
    }
    struct oribi_conn *c = conn_new(loop, fd);
    if (!c) {
        close(fd);
        if (fds_short)
            spare_restore(loop);
        return -1;
    }
    /* Shed after the accept, not before: the connection may have gone to
     * another worker, and one over the limit for a moment costs one fd. */
    if (fds_short) {
        shed_one(loop, 1);
        spare_restore(loop);
    } else if (loop->nconns > loop->opt.max_connections) {
        shed_one(loop, 0);
    }
    loop->hot_listener = li;
    oribi_admit_took(&loop->admit);
    if (loop->listeners[li].owed > 0)
        loop->listeners[li].owed--;
    oribi_sched_backlog_seen(&loop->sched); /* there may be more behind it */
    if (loop->draining && loop->drain_left > 0 && --loop->drain_left == 0)
        close_listeners(loop, 1); /* what was queued when the stop began is taken */
    c->listener = li;
    memcpy(&c->peer, &ss, sl < sizeof(ss) ? sl : sizeof(ss));
    c->peer_len = sl;
    /* What accept says of a unix peer varies (the BSDs may say nothing):
     * the family is what tells it from an address a PROXY header gives. */
    if (loop->listeners[li].is_unix)
        c->peer.ss_family = AF_UNIX;
    c->proxy = (unsigned char)loop->listeners[li].proxy;
    if (loop->listeners[li].tls && oribi_tls_start(c, loop->listeners[li].tls) < 0) {
        conn_close(loop, c);
        return 0;
    }
    c->may_read = 1;
    c->seen_us = oribi_mono_us();
    timer_arm(loop, c, TIMER_HEAD);
    conn_read(loop, c);
    return 0;
}

/* A connection-per-request load keeps the backlog full: after a connection
 * came from a listener, the next one is taken from it straight away instead
 * of asking epoll first (one syscall of five per connection). An empty
 * backlog ends the run at the cost of one accept4 that finds nothing; the
 * other connections and the timers get an epoll_wait every ACCEPT_RUN. */
int accept_direct(struct oribi_loop *loop)
{
    if (loop->hot_listener < 0 || loop->accept_run >= ACCEPT_RUN)
        return 0;
    loop->now = oribi_coarse_ms();
    if (!admit(loop, ADMIT_RUN))
        return 0;
    loop->accept_run++;
    if (accept_one(loop, loop->hot_listener) < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            oribi_sched_backlog_empty(&loop->sched);
        loop->hot_listener = -1;
        return 0;
    }
    return 1;
}

/* One connection from whichever listener has one, the last that did
 * first, its request (if complete) queued. Returns 1, 0 when none
 * was taken, -1 when every listener said it has none (the backlog is
 * empty; no listener is hot any more). */
int accept_any(struct oribi_loop *loop)
{
    int start = loop->hot_listener >= 0 ? loop->hot_listener : 0, empty = 0;
    for (int k = 0; k < loop->nlisteners && (k == 0 || admit(loop, ADMIT_AGAIN)); k++) {
        if (accept_one(loop, (start + k) % loop->nlisteners) == 0)
            return 1;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            empty++;
    }
    if (empty < loop->nlisteners)
        return 0;
    loop->hot_listener = -1;
    return -1;
}

/* Draining: the backlog is served as at any other time, a connection
 * whenever a thread is free, so every worker takes its share. The moment
 * the listeners are found empty they close: a client that connects later is
 * refused (or goes to a worker still holding them) rather than queued for
 * a worker that will not come back for it. Returns 1 when a connection
 * was taken. */
int take_backlog(struct oribi_loop *loop)
{
    loop->now = oribi_coarse_ms();
    if (!admit(loop, ADMIT_DRAIN))
        return 0;
    int r = accept_any(loop);
    if (r < 0)
        close_listeners(loop, 1);
    return r > 0;
}

/* When shed_backlog and shed_spooled look again, while a budget is over
 * (ms), -1 none. */
int64_t shed_deadline(const struct oribi_loop *loop)
{
    return over_budget(loop) || spool_full(loop) ? loop->now + SHED_STALL_MS : -1;
}

/* Over max_write_backlog: the clients that took none of their bytes for
 * SHED_STALL_MS are dropped (down to half the cap), so that clients that do not read cannot make
 * a worker hold their responses in memory (meanwhile oribi_loop_run hands
 * out no request). One that reads keeps its own. */
void shed_backlog(struct oribi_loop *loop)
{
    size_t before = __atomic_load_n(&loop->budget.kept, __ATOMIC_RELAXED);
    unsigned dropped = 0;
    /* Down to half the cap, not just under it: else each response that
     * passes the cap again waits SHED_STALL_MS for one client to go. */
    size_t low = loop->budget.cap / 2;
    for (int fd = 0; fd < loop->by_fd_cap && __atomic_load_n(&loop->budget.kept, __ATOMIC_RELAXED) > low; fd++) {
        struct oribi_conn *c = loop->by_fd[fd];
        if (c && c->state == CONN_FLUSH && loop->now - c->wprogress_ms >= SHED_STALL_MS) {
            conn_close(loop, c);
            dropped++;
        }
    }
    loop->dropped.count += dropped;
    uint64_t n = oribi_tally_due(&loop->dropped, loop->now, 1000);
    if (n)
        oribi_log("write backlog %zu bytes over max_write_backlog %zu: dropped %llu client(s) that read nothing for "
                  "%d ms",
                  before, loop->budget.cap, (unsigned long long)n, SHED_STALL_MS);
}

/* The spool nearly full (max_worker_spool): the spooled responses the
 * loop sends for clients that took none of their bytes for SHED_STALL_MS
 * are dropped, as for the write backlog, so that their disk goes to
 * clients that read. */
void shed_spooled(struct oribi_loop *loop)
{
    unsigned dropped = 0;
    for (int fd = 0; fd < loop->by_fd_cap && spool_full(loop); fd++) {
        struct oribi_conn *c = loop->by_fd[fd];
        if (c && c->state == CONN_FLUSH && c->file_spooled && loop->now - c->wprogress_ms >= SHED_STALL_MS) {
            conn_close(loop, c);
            dropped++;
        }
    }
    loop->dropped_spool.count += dropped;
    uint64_t n = oribi_tally_due(&loop->dropped_spool, loop->now, 1000);
    if (n)
        oribi_log("max_worker_spool (%zu bytes) nearly full: dropped %llu client(s) that read nothing for %d ms",
                  loop->budget.spool_cap, (unsigned long long)n, SHED_STALL_MS);
}
