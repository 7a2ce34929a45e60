#include "loop/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loop/body.h"
#include "loop/clock.h"
#include "loop/log.h"
#include "http/response.h"

#define CONN_BUF_INITIAL 8192
#define CONN_BUF_KEEP    65536 /* larger buffers are freed when a conn is recycled */
#define ACCEPT_PAUSE_MS  100   /* after EMFILE/ENFILE */
#define ACCEPT_SHARE_MS  1     /* after taking a connection while holding others */
#define SHED_LOG_MS      10000 /* the line saying connections are shed, at most this often */
#define ACCEPT_RUN       8     /* accepts without an epoll_wait, at most */
#define TURN_POLL_MS     1     /* kept-alive clients' requests join the queue this late at most */

/* epoll data for non-conn fds: a conn pointer is always even-aligned, so
 * small integers cannot collide with one. */
#define TAG_WAKE        ((uintptr_t)1)
#define TAG_LISTENER(i) ((uintptr_t)(3 + 2 * (i)))
#define IS_TAG(p)       (((uintptr_t)(p)) & 1)

/* The master's view of this worker's connections (stats): two stores. */
static inline void publish(struct oribi_loop *loop)
{
    if (loop->score) {
        loop->score->conns = loop->nconns;
        loop->score->idle = loop->nidle;
    }
}

/* ---- timers: one FIFO per kind; all entries of a kind share one duration,
 * so appending keeps each list sorted by deadline. ---- */

static void timer_unlink(struct oribi_loop *loop, struct oribi_conn *c)
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

static void timer_arm(struct oribi_loop *loop, struct oribi_conn *c, int kind)
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

static int over_budget(const struct oribi_loop *loop)
{
    return loop->budget.cap && __atomic_load_n(&loop->budget.kept, __ATOMIC_RELAXED) > loop->budget.cap;
}

static int next_timeout(struct oribi_loop *loop)
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
    if (over_budget(loop) && (first < 0 || loop->now + SHED_STALL_MS < first))
        first = loop->now + SHED_STALL_MS; /* shed_backlog looks again then */
    if (first < 0)
        return -1;
    int64_t d = first - loop->now;
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d;
}

/* ---- connections ---- */

static struct oribi_conn *conn_new(struct oribi_loop *loop, int fd)
{
    struct oribi_conn *c = loop->free_list;
    if (c) {
        loop->free_list = c->qnext;
    } else {
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        c->headers = calloc(loop->opt.limits.max_headers, sizeof(struct oribi_header));
        if (!c->headers) {
            free(c);
            return NULL;
        }
    }
    if (fd >= loop->by_fd_cap) {
        int cap = loop->by_fd_cap ? loop->by_fd_cap : 1024;
        while (cap <= fd)
            cap *= 2;
        struct oribi_conn **t = realloc(loop->by_fd, (size_t)cap * sizeof(*t));
        if (!t) {
            c->qnext = loop->free_list;
            loop->free_list = c;
            return NULL;
        }
        memset(t + loop->by_fd_cap, 0, (size_t)(cap - loop->by_fd_cap) * sizeof(*t));
        loop->by_fd = t;
        loop->by_fd_cap = cap;
    }
    c->fd = fd;
    c->gen++;
    c->state = CONN_HEAD;
    c->in_epoll = c->may_read = c->close_after = c->buf_moved = c->peer_hup = 0;
    c->len = c->last_len = c->head_len = c->rest_off = 0;
    c->body_fd = -1;
    c->wlen = c->woff = 0;
    c->file_fd = -1;
    c->budget = &loop->budget;
    c->requests = 0;
    c->seen_us = 0;
    c->qnext = NULL;
    loop->by_fd[fd] = c;
    loop->nconns++;
    return c;
}

static void resume_accepting(struct oribi_loop *loop);

/* Puts the conn back on the free list; its fd is closed unless it was
 * handed to the app. */
static void conn_release(struct oribi_loop *loop, struct oribi_conn *c, int close_fd)
{
    timer_unlink(loop, c);
    if (c->body_fd >= 0)
        close(c->body_fd);
    c->body_fd = -1;
    oribi_conn_discard_output(c);
    if (close_fd)
        close(c->fd);
    if (loop->by_fd[c->fd] == c) /* a detached fd may be another conn's already */
        loop->by_fd[c->fd] = NULL;
    c->fd = -1;
    c->state = CONN_CLOSED;
    c->gen++;
    if (c->cap > CONN_BUF_KEEP) {
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
    if (c->wcap > CONN_BUF_KEEP) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
    c->qnext = loop->free_list;
    loop->free_list = c;
    loop->nconns--;
    resume_accepting(loop);
}

static void conn_close(struct oribi_loop *loop, struct oribi_conn *c)
{
    conn_release(loop, c, 1);
}

int oribi_loop_detach(struct oribi_loop *loop, struct oribi_conn *c)
{
    int fd = c->fd;
    /* The fd lives on in the app: its events must not reach this loop,
     * whose pointer to the conn is about to be recycled. */
    oribi_loop_unwatch(loop, c);
    conn_release(loop, c, 0);
    return fd;
}

void oribi_loop_unwatch(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->in_epoll)
        epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->in_epoll = 0;
}

static int conn_watch(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->in_epoll)
        return 0;
    /* Edge-triggered: an idle connection costs nothing until bytes arrive,
     * and a conn the app holds does not wake the loop. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        return -1;
    c->in_epoll = 1;
    c->may_read = 1; /* bytes may have come before the watch */
    return 0;
}

static void queue_ready(struct oribi_loop *loop, struct oribi_conn *c)
{
    timer_unlink(loop, c);
    c->state = CONN_READY;
    c->ready_at = loop->now;
    if (loop->queue_front) { /* from the backlog, older than the queue (take_turn) */
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

/* Closing with unread input makes the kernel send RST, which can destroy
 * the response before the client reads it: shut the write side and drain. */
static void conn_linger(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (shutdown(c->fd, SHUT_WR) < 0 || conn_watch(loop, c) < 0) {
        conn_close(loop, c);
        return;
    }
    c->state = CONN_LINGER;
    c->len = 0;
    timer_arm(loop, c, TIMER_LINGER);
}

/* A 5xx the loop answers for a request it will not serve (a 500 is logged
 * where it happens, with its errno): who sent it, and why. */
static void log_refusal(struct oribi_conn *c, int status)
{
    char peer[INET6_ADDRSTRLEN] = "unix";
    const struct sockaddr *sa = (const struct sockaddr *)&c->peer;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, peer, sizeof(peer));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, peer, sizeof(peer));
    oribi_log("answered %d to %s: %s", status, peer,
              status == 501 ? "a transfer coding other than chunked" : "an HTTP major version other than 1");
}

static void conn_reject(struct oribi_loop *loop, struct oribi_conn *c, int status)
{
    if (status == 501 || status == 505)
        log_refusal(c, status);
    char out[512];
    size_t n = oribi_error_response(out, sizeof(out), status, &loop->date, time(NULL), 0);
    struct iovec iov = {out, n};
    loop->rejected++;
    c->close_after = 1;
    if (oribi_conn_write(c, &iov, 1) < 0) {
        conn_close(loop, c);
        return;
    }
    if (oribi_conn_pending(c)) {
        if (conn_watch(loop, c) < 0) {
            conn_close(loop, c);
            return;
        }
        c->state = CONN_FLUSH;
        timer_arm(loop, c, TIMER_WRITE);
        return;
    }
    conn_linger(loop, c);
}

static void conn_process(struct oribi_loop *loop, struct oribi_conn *c);

/* An unmet Expect on a bodyless request: the head is valid and nothing
 * follows it but the next request, so answer 417 and go on. */
static int conn_refuse_expectation(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->req.chunked || c->req.content_length > 0 || !c->req.keepalive || !loop->opt.keepalive || loop->stopping ||
        (loop->opt.keepalive_requests && c->requests + 1 >= loop->opt.keepalive_requests))
        return 0;
    char out[512];
    size_t n = oribi_error_response(out, sizeof(out), 417, &loop->date, time(NULL), 1);
    struct iovec iov = {out, n};
    loop->rejected++;
    if (oribi_conn_write(c, &iov, 1) < 0) {
        conn_close(loop, c);
        return 1;
    }
    c->head_len = c->rest_off = c->req.head_len;
    oribi_loop_finish(loop, c, 1);
    return 1;
}

/* A head is complete: check what the loop must answer itself, then read the body. */
static void head_done(struct oribi_loop *loop, struct oribi_conn *c, int head_len)
{
    c->head_len = (size_t)head_len;
    c->buf_moved = 0;
    if (c->req.expect_continue && c->req.minor_version == 1 && (c->req.chunked || c->req.content_length > 0) &&
        !(loop->opt.max_body && c->req.content_length > loop->opt.max_body)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        struct iovec iov = {(void *)cont, sizeof(cont) - 1};
        if (oribi_conn_write(c, &iov, 1) < 0) {
            conn_close(loop, c);
            return;
        }
    }
    int r = oribi_body_begin(loop, c);
    if (r == BODY_DONE) {
        queue_ready(loop, c);
    } else if (r == BODY_MORE) {
        c->state = CONN_BODY;
        c->body_start = loop->now;
        timer_arm(loop, c, TIMER_BODY);
        if (loop->opt.min_body_rate && !loop->rate_check_at)
            loop->rate_check_at = loop->now + ORIBI_BODY_RATE_CHECK_MS;
    } else {
        conn_reject(loop, c, r);
    }
}

/* Acts on the bytes in c->buf according to the state. */
static void conn_process(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->state == CONN_HEAD) {
        if (c->len == 0)
            return;
        if (c->timer != TIMER_HEAD)
            timer_arm(loop, c, TIMER_HEAD); /* the header timeout runs from the first byte */
        c->req.headers = c->headers;
        c->req.num_headers = loop->opt.limits.max_headers;
        int r = oribi_parse_request(c->buf, c->len, c->last_len, &c->req, &loop->opt.limits);
        if (r > 0)
            head_done(loop, c, r);
        else if (r == ORIBI_PARSE_INCOMPLETE)
            c->last_len = c->len;
        else if (!(c->req.status == 417 && conn_refuse_expectation(loop, c)))
            conn_reject(loop, c, c->req.status);
    } else if (c->state == CONN_BODY) {
        int r = oribi_body_feed(loop, c);
        if (r == BODY_DONE) {
            queue_ready(loop, c);
        } else if (r == BODY_MORE) {
            if (c->body_total - c->body_mark >= ORIBI_BODY_PROGRESS) {
                c->body_mark = c->body_total;
                timer_arm(loop, c, TIMER_BODY);
            }
        } else {
            conn_reject(loop, c, r);
        }
    } else if (c->state == CONN_LINGER) {
        c->len = 0;
    }
}

/* Reads while the socket has bytes and the conn wants them. */
static void conn_read(struct oribi_loop *loop, struct oribi_conn *c)
{
    while (c->may_read && (c->state == CONN_HEAD || c->state == CONN_BODY || c->state == CONN_LINGER)) {
        size_t want = c->state == CONN_HEAD ? 4096 : 16384;
        if (c->state == CONN_HEAD) {
            size_t max = loop->opt.limits.max_request_line + loop->opt.limits.max_header_bytes + 1024;
            if (c->len >= max) {
                conn_reject(loop, c, 431);
                return;
            }
            if (want > max - c->len)
                want = max - c->len;
        }
        if (c->cap - c->len < want && oribi_conn_reserve(c, want) < 0) {
            conn_close(loop, c);
            return;
        }
        size_t space = c->cap - c->len;
        ssize_t n = read(c->fd, c->buf + c->len, space);
        if (n > 0) {
            if (!c->seen_us && c->state == CONN_HEAD && c->len == 0)
                c->seen_us = oribi_mono_us(); /* the first byte of a next request */
            c->len += (size_t)n;
            /* A short read usually means the socket is drained, but when
             * the peer's FIN came in the same edge the EOF is still
             * unread, and edge-triggered epoll reports it only once: a
             * client that aborts mid-body would hold its fd (and its
             * tmpfile) until the body timeout. */
            c->may_read = (size_t)n == space || c->peer_hup;
            conn_process(loop, c);
        } else if (n == 0) {
            /* EOF: an idle or partial request just ends; a half-sent body is
             * never handed to the app. */
            conn_close(loop, c);
            return;
        } else if (errno == EAGAIN) {
            c->may_read = 0;
        } else if (errno != EINTR) {
            conn_close(loop, c);
            return;
        }
    }
    if (c->state == CONN_HEAD || c->state == CONN_BODY || c->state == CONN_LINGER) {
        if (conn_watch(loop, c) < 0)
            conn_close(loop, c);
        else if (c->state == CONN_HEAD && c->len == 0 && c->timer == TIMER_NONE)
            timer_arm(loop, c, c->requests ? TIMER_IDLE : TIMER_HEAD);
    }
}

/* The response is out: next request, or close. */
static void conn_after_response(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->close_after) {
        if (c->len > c->rest_off || c->may_read)
            conn_linger(loop, c);
        else
            conn_close(loop, c);
        return;
    }
    memmove(c->buf, c->buf + c->rest_off, c->len - c->rest_off);
    c->len -= c->rest_off;
    c->rest_off = c->head_len = c->last_len = 0;
    c->state = CONN_HEAD;
    /* A pipelined request was there all along, but waited for this one. */
    c->seen_us = c->len ? oribi_mono_us() : 0;
    /* The idle time starts now, not when the request was taken: the app
     * may have run for longer than the whole keep-alive timeout. (Always
     * the loop's own thread: app threads hand their responses back.) */
    loop->now = oribi_coarse_ms();
    timer_arm(loop, c, c->len ? TIMER_HEAD : TIMER_IDLE);
    /* Pipelined bytes and the socket are looked at from the loop, not from
     * here: this runs inside a response, and a pipeline of answers the loop
     * gives itself (417) must not recurse. */
    if (loop->npending == loop->pending_cap) {
        int cap = loop->pending_cap ? loop->pending_cap * 2 : 64;
        struct oribi_pending *p = realloc(loop->pending, (size_t)cap * sizeof(*p));
        if (!p) {
            conn_close(loop, c);
            return;
        }
        loop->pending = p;
        loop->pending_cap = cap;
    }
    loop->pending[loop->npending++] = (struct oribi_pending){c, c->gen};
}

/* Connections whose response is out: next pipelined request, or read on. */
static void drain_pending(struct oribi_loop *loop)
{
    while (loop->npending) {
        struct oribi_pending p = loop->pending[--loop->npending];
        struct oribi_conn *c = p.conn;
        if (c->gen != p.gen || c->state != CONN_HEAD)
            continue; /* closed (and maybe reused) since */
        if (c->len)
            conn_process(loop, c);
        if (c->state == CONN_HEAD || c->state == CONN_BODY) {
            if (conn_watch(loop, c) < 0)
                conn_close(loop, c);
            else
                conn_read(loop, c);
        }
    }
}

/* What epoll said about reading: bytes or a hangup to read to. */
static int note_readable(struct oribi_conn *c, uint32_t events)
{
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        return 0;
    c->may_read = 1;
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->peer_hup = 1;
    return 1;
}

void oribi_loop_finish(struct oribi_loop *loop, struct oribi_conn *c, int keepalive)
{
    if (c->body_fd >= 0) {
        close(c->body_fd);
        c->body_fd = -1;
    }
    c->requests++;
    /* Not loop->stopping: a response that said keep-alive (the drain began
     * while it was written, or while an app thread handed it back) gets
     * the idle grace of oribi_loop_stop, so that the request the client may
     * be sending right now is still answered. */
    if (!keepalive)
        c->close_after = 1;
    if (c->app_events) {
        /* The loop ran while the app had the conn (threads) and took these
         * edges: act on them now, none may come again. */
        note_readable(c, c->app_events);
        if ((c->app_events & EPOLLOUT) && oribi_conn_pending(c) && oribi_conn_send_pending(c) < 0) {
            conn_close(loop, c);
            return;
        }
        c->app_events = 0;
    }
    if (oribi_conn_pending(c)) {
        c->state = CONN_FLUSH;
        if (conn_watch(loop, c) < 0) {
            conn_close(loop, c);
            return;
        }
        timer_arm(loop, c, TIMER_WRITE);
        return;
    }
    conn_after_response(loop, c);
}

int oribi_conn_take_body_fd(struct oribi_conn *c)
{
    int fd = c->body_fd;
    c->body_fd = -1;
    return fd;
}

/* ---- accepting ---- */

static void set_accepting(struct oribi_loop *loop, int on)
{
    if (loop->accepting == on || (on && !loop->listening))
        return;
    for (int i = 0; i < loop->nlisteners; i++) {
        /* EPOLLEXCLUSIVE: one waiting worker wakes per connection; a worker
         * busy in the app is not waiting, so it takes none it cannot serve. */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = (void *)TAG_LISTENER(i)};
        epoll_ctl(loop->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, loop->listeners[i].fd, &ev);
    }
    loop->accepting = on;
}

/* Which conn a full worker closes to take a new one: the one that has
 * waited longest for a request of its own, between requests (keep-alive)
 * or in the middle of a head (a silent one included). Each list is in the
 * order its conns were armed, so the older of the two heads is the oldest.
 * Never a conn past its head (a body on its way, a request queued or in
 * the app, a response being written): its client has committed a request
 * and the server owes it an answer; closing it would cost a request, not
 * a reconnect, and would let a flood of connects cancel work in flight. */
static struct oribi_conn *shed_candidate(struct oribi_loop *loop)
{
    struct oribi_conn *idle = loop->timers[TIMER_IDLE][0], *head = loop->timers[TIMER_HEAD][0];
    if (!idle || !head)
        return idle ? idle : head;
    int64_t idle_since = idle->deadline - loop->timeout_ms[TIMER_IDLE];
    return idle_since <= head->deadline - loop->timeout_ms[TIMER_HEAD] ? idle : head;
}

/* Room for one more connection, if need be by shedding one. */
static int has_room(struct oribi_loop *loop)
{
    return loop->nconns < loop->opt.max_connections || shed_candidate(loop);
}

/* How many the tally counted since its last log line, when one is due now
 * (the first at once, then at most every every_ms), else 0. */
static uint64_t tally_due(struct oribi_tally *t, int64_t now, int64_t every_ms)
{
    if (t->count == t->told || (t->told && now - t->told_at < every_ms))
        return 0;
    uint64_t n = t->count - t->told;
    t->told = t->count;
    t->told_at = now;
    return n;
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
    uint64_t n = tally_due(t, loop->now, SHED_LOG_MS);
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

/* The spare fd back in place, when the fd it gave up is free again. */
static void spare_restore(struct oribi_loop *loop)
{
    if (loop->spare_fd < 0)
        loop->spare_fd = fcntl(loop->wakefd, F_DUPFD_CLOEXEC, 0);
}

/* Accepting again, unless something still says no: a pause, every app
 * thread busy, no room, or a stop that is not (or no longer) draining. */
static void resume_accepting(struct oribi_loop *loop)
{
    if (!loop->accepting && !loop->accept_resume_at && !loop->hold && has_room(loop) &&
        (!loop->stopping || loop->draining))
        set_accepting(loop, 1);
}

/* The pause after an accept (or EMFILE) is over once its time has come.
 * A full worker may have room again without a close, too: a conn that
 * went idle can be shed. */
static void end_pause(struct oribi_loop *loop)
{
    if (loop->accept_resume_at && loop->accept_resume_at <= loop->now)
        loop->accept_resume_at = 0;
    resume_accepting(loop);
}

static void close_listeners(struct oribi_loop *loop)
{
    set_accepting(loop, 0);
    if (loop->listening)
        for (int i = 0; i < loop->nlisteners; i++)
            close(loop->listeners[i].fd);
    loop->listening = 0;
    loop->draining = 0;
    loop->hot_listener = -1;
}

/* Connections may wait in the backlog: since the last poll at the latest
 * (take_turn orders them against the ready queue by that). */
static void note_backlog(struct oribi_loop *loop)
{
    if (!loop->backlog) {
        loop->backlog = 1;
        loop->backlog_since = loop->polled_at;
    }
}

/* Accepts one connection and reads it at once: with TCP_DEFER_ACCEPT the
 * request is usually there, so a connection-per-request client costs
 * accept4 + read + sendmsg + close and never touches epoll_ctl. in_turn:
 * part of a turn at the backlog (take_turn), which shares it already. */
static int accept_one(struct oribi_loop *loop, int li, int in_turn)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(loop->listeners[li].fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    int fds_short = 0;
    if (fd < 0 && errno == EMFILE && loop->spare_fd >= 0 && shed_candidate(loop)) {
        /* Out of fds while holding a connection it may shed: the spare
         * makes room for the accept, the shed (below) for the spare. A
         * client behind idle ones is served, not left in the backlog until
         * a header or keep-alive timeout frees an fd. */
        close(loop->spare_fd);
        loop->spare_fd = -1;
        sl = sizeof(ss);
        fd = accept4(loop->listeners[li].fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            set_accepting(loop, 0);
            loop->accept_resume_at = loop->now + ACCEPT_PAUSE_MS;
        }
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
    note_backlog(loop); /* there may be more behind it */
    if (loop->draining && loop->drain_left > 0 && --loop->drain_left == 0)
        close_listeners(loop); /* what was queued when the stop began is taken */
    c->listener = li;
    memcpy(&c->peer, &ss, sl < sizeof(ss) ? sl : sizeof(ss));
    c->peer_len = sl;
    c->may_read = 1;
    c->seen_us = oribi_mono_us();
    timer_arm(loop, c, TIMER_HEAD);
    conn_read(loop, c);
    if (!has_room(loop)) {
        set_accepting(loop, 0);
    } else if (loop->opt.share_accepts && (loop->timers[TIMER_IDLE][0] || loop->timers[TIMER_HEAD][0]) &&
               !loop->stopping && !in_turn && loop->nconns < loop->opt.max_connections) {
        /* Holding idle keep-alive connections already: stand aside for a
         * moment, so that a burst of keep-alive clients spreads over the
         * workers. Wakeups on an EPOLLEXCLUSIVE listener favour the worker
         * that is running, which would otherwise take them all and leave
         * the others idle for as long as the clients stay. A worker alone
         * never pauses (share_accepts: other workers exist), nor one
         * serving a connection per request, nor a full one: it has its
         * share, and when it is shedding every worker is full, so a pause
         * would only keep the clients behind a flood waiting longer. */
        set_accepting(loop, 0);
        loop->accept_resume_at = loop->now + ACCEPT_SHARE_MS;
    }
    return 0;
}

/* A connection-per-request load keeps the backlog full: after a connection
 * came from a listener, the next one is taken from it straight away instead
 * of asking epoll first (one syscall of five per connection). An empty
 * backlog ends the run at the cost of one accept4 that finds nothing; the
 * other connections and the timers get an epoll_wait every ACCEPT_RUN. */
static int accept_direct(struct oribi_loop *loop)
{
    if (loop->hot_listener < 0 || !loop->accepting || loop->ready_head || loop->hold || loop->accept_run >= ACCEPT_RUN)
        return 0;
    loop->accept_run++;
    loop->now = oribi_coarse_ms();
    if (accept_one(loop, loop->hot_listener, 0) < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            loop->backlog = 0;
        loop->hot_listener = -1;
        return 0;
    }
    return 1;
}

/* One connection from whichever listener has one, the last that did
 * first. Returns 1, 0 when none was taken, -1 when every listener said it
 * has none (the backlog is empty; no listener is hot any more). */
static int accept_any(struct oribi_loop *loop, int in_turn)
{
    int start = loop->hot_listener >= 0 ? loop->hot_listener : 0, empty = 0;
    for (int k = 0; k < loop->nlisteners && loop->accepting; k++) {
        if (accept_one(loop, (start + k) % loop->nlisteners, in_turn) == 0)
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
static int take_backlog(struct oribi_loop *loop)
{
    if (loop->hold || loop->ready_head || !has_room(loop))
        return 0;
    loop->now = oribi_coarse_ms();
    int r = accept_any(loop, 0);
    if (r < 0)
        close_listeners(loop);
    return r > 0;
}

/* ---- the loop ---- */

int oribi_loop_init(struct oribi_loop *loop, const struct oribi_options *opt, const struct oribi_listener *listeners,
                    int n)
{
    memset(loop, 0, sizeof(*loop));
    loop->opt = *opt;
    if (n > ORIBI_MAX_LISTENERS) {
        errno = EINVAL;
        return -1;
    }
    loop->epfd = loop->wakefd = loop->spare_fd = -1;
    memcpy(loop->listeners, listeners, (size_t)n * sizeof(*listeners));
    /* Copies of its own: a draining worker serves the backlog after the
     * process has closed its listeners, and closes these once it is empty. */
    for (int i = 0; i < n; i++) {
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
            close_listeners(loop);
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
    loop->now = oribi_coarse_ms();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void *)TAG_WAKE};
    if (loop->epfd < 0 || loop->wakefd < 0 || epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0) {
        int err = errno;
        oribi_loop_free(loop);
        errno = err;
        return -1;
    }
    spare_restore(loop); /* none is no error: EMFILE then pauses as it would */
    set_accepting(loop, 1);
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
        free(c->headers);
        free(c);
    }
    free(loop->by_fd);
    loop->by_fd = NULL;
    free(loop->pending);
    loop->pending = NULL;
    loop->npending = loop->pending_cap = 0;
    close_listeners(loop);
    if (loop->epfd >= 0)
        close(loop->epfd);
    if (loop->wakefd >= 0)
        close(loop->wakefd);
    if (loop->spare_fd >= 0)
        close(loop->spare_fd);
    loop->epfd = loop->wakefd = loop->spare_fd = -1;
}

void oribi_loop_wake(struct oribi_loop *loop)
{
    uint64_t one = 1;
    __atomic_store_n(&loop->wake_pending, 1, __ATOMIC_RELAXED);
    ssize_t r = write(loop->wakefd, &one, sizeof(one));
    (void)r;
}

/* Over max_write_backlog: the clients that took none of their bytes for
 * SHED_STALL_MS are dropped (down to half the cap), so that clients that do not read cannot make
 * a worker hold their responses in memory (meanwhile oribi_loop_run hands
 * out no request). One that reads keeps its own. */
static void shed_backlog(struct oribi_loop *loop)
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
    uint64_t n = tally_due(&loop->dropped, loop->now, 1000);
    if (n)
        oribi_log("write backlog %zu bytes over max_write_backlog %zu: dropped %llu client(s) that read nothing for "
                  "%d ms",
                  before, loop->budget.cap, (unsigned long long)n, SHED_STALL_MS);
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

static void expire_timers(struct oribi_loop *loop)
{
    if (over_budget(loop))
        shed_backlog(loop);
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

static void on_conn_event(struct oribi_loop *loop, struct oribi_conn *c, uint32_t events)
{
    if (c->state == CONN_APP) { /* an app thread writes to it: kept for later */
        c->app_events |= events;
        return;
    }
    if ((events & EPOLLOUT) && c->state == CONN_FLUSH) {
        int64_t progress = c->wprogress_ms;
        int r = oribi_conn_send_pending(c);
        if (r < 0) {
            conn_close(loop, c);
            return;
        }
        if (r == 0) {
            conn_after_response(loop, c);
            if (c->state == CONN_CLOSED)
                return;
        } else if (c->wprogress_ms != progress) {
            timer_arm(loop, c, TIMER_WRITE); /* write_timeout counts from the last byte the client took */
        }
    }
    if (note_readable(c, events))
        conn_read(loop, c);
}

/* One epoll_wait and what it reported, then the timers. Returns what
 * epoll_wait returned (-1 with errno: nothing was done). */
static int poll_events(struct oribi_loop *loop, int timeout)
{
    struct epoll_event events[64];
    int n = epoll_wait(loop->epfd, events, 64, timeout);
    loop->now = oribi_coarse_ms();
    loop->accept_run = 0;
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        void *p = events[i].data.ptr;
        if (p == (void *)TAG_WAKE) {
            __atomic_store_n(&loop->wake_pending, 1, __ATOMIC_RELAXED);
        } else if (IS_TAG(p)) {
            /* Taken at once when nothing is ready; else in turns, as the
             * ready requests are handed out (oribi_loop_take). */
            int li = (int)(((uintptr_t)p - 3) / 2);
            note_backlog(loop);
            if (loop->accepting && !loop->ready_head)
                accept_one(loop, li, 0);
        } else {
            on_conn_event(loop, (struct oribi_conn *)p, events[i].events);
        }
    }
    expire_timers(loop);
    loop->polled_at = loop->now;
    return n;
}

/* The scheduler, at every request handed out: one queue of clients in the
 * order they came. Kept-alive clients' requests join its tail when epoll
 * is asked (at most every TURN_POLL_MS while there are such clients, so
 * that they join about when they came, at no cost to an app that answers
 * in microseconds). A connection in the backlog has waited since the
 * backlog was first seen; once that is no later than the queue's head, one
 * is taken and served next. One per request handed out: the workers take
 * their share of a backlog at the rate they serve, and none hoards
 * connections it cannot serve soon (an idle worker takes them as they
 * come). Without a backlog or kept-alive clients this costs nothing. */
static void take_turn(struct oribi_loop *loop)
{
    /* TIMER_HEAD: clients whose request is on its way (a new connection
     * whose bytes were not there yet when it was accepted). */
    int arriving = loop->backlog || loop->timers[TIMER_HEAD][0];
    if (!arriving && !loop->nidle)
        return;
    loop->now = oribi_coarse_ms();
    if (!arriving && loop->now - loop->polled_at < TURN_POLL_MS)
        return;
    end_pause(loop);
    /* Those just answered are watched first (one accepted with its request
     * complete never was); other conns (flushes, timers) every few turns. */
    int64_t before = loop->polled_at;
    if (loop->nidle || loop->timers[TIMER_HEAD][0] || ++loop->accept_run >= ACCEPT_RUN) {
        drain_pending(loop);
        poll_events(loop, 0);
    }
    /* Without a known backlog, look anyway (every TURN_POLL_MS): with
     * EPOLLEXCLUSIVE only the worker a connection woke is told of it, and
     * a busy worker that never looked would leave the whole backlog to
     * that one. What it finds came after the last look. */
    int64_t since = loop->backlog ? loop->backlog_since : before;
    if (!loop->accepting || (loop->ready_head && loop->ready_head->ready_at < since))
        return;
    loop->queue_front = 1;
    int r = accept_any(loop, 1);
    loop->queue_front = 0;
    if (r > 0)
        loop->backlog_since = since; /* the rest waited as long at most */
    else if (r < 0)
        loop->backlog = 0;
}

int oribi_loop_run(struct oribi_loop *loop, int block)
{
    for (;;) {
        drain_pending(loop);
        /* Over max_write_backlog no request is handed out, so that no new
         * response adds to it, until shed_backlog or the clients bring it
         * down. */
        if (loop->ready_head && !loop->hold && !over_budget(loop)) {
            publish(loop);
            return LOOP_READY;
        }
        /* Relaxed: the flag orders nothing; what a waker hands over is
         * under its own lock (the handbacks, the GVL). */
        if (__atomic_load_n(&loop->wake_pending, __ATOMIC_RELAXED)) {
            uint64_t v;
            ssize_t r = read(loop->wakefd, &v, sizeof(v));
            (void)r;
            __atomic_store_n(&loop->wake_pending, 0, __ATOMIC_RELAXED);
            return LOOP_INTERRUPTED;
        }
        if (loop->draining && take_backlog(loop))
            continue;
        if (loop->stopping && !loop->draining && loop->nconns == 0)
            return LOOP_STOPPED;
        if (block)
            loop->now = oribi_coarse_ms(); /* the app may have run long since the last wakeup */
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
        if (!block && (!loop->ready_head || loop->hold || over_budget(loop)))
            return LOOP_IDLE;
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
    if (loop->opt.keepalive_requests && c->requests + 1 >= loop->opt.keepalive_requests)
        c->req.keepalive = 0;
    if (!loop->opt.keepalive || loop->stopping)
        c->req.keepalive = 0;
    return c;
}

void oribi_loop_stop(struct oribi_loop *loop, long drain)
{
    if (loop->stopping) {
        if (!drain)
            close_listeners(loop); /* e.g. retired (max_requests) while draining */
        return;
    }
    loop->stopping = 1;
    loop->accept_resume_at = 0;
    /* Connections in the backlog were accepted by the kernel and have sent
     * their request: they are in flight, and served before the listeners
     * close (take_backlog). Not taken all at once here: a worker busy in
     * the app would hold them while the others sit idle. */
    if (drain) {
        loop->draining = 1;
        loop->drain_left = drain;
        resume_accepting(loop);
    } else {
        close_listeners(loop);
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
