/*
 * One load generator thread (see loadgen_internal.h): a fixed slice of the
 * connections and an event loop over them (os/poller.h).
 *
 * A connection's cycle: claim a request, connect if it has no socket, send,
 * read until the response is framed, record, then start the next cycle at
 * once, on the same socket when both sides allow it. The next request is
 * written straight after the response is read, without waiting for an
 * writable round trip: keep-alive costs one send and one recv per request.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "http/chunked.h"
#include "http/parser.h"
#define ORIBI_POLL_BATCH 256 /* thousands of connections per thread: fewer waits */
#include "os/poller.h"
#include "os/socket.h"
#include "loadgen_internal.h"
#include "results.h"

#define RBUF_SIZE 65536                      /* one read per readiness event, shared per thread */
#define HEAD_MAX  65536                      /* response heads beyond this are parse errors */
#define OBUF_SIZE (1024 * ORIBI_RESULT_SIZE) /* results stream, per thread */
#define SWEEP_NS  10000000ull                /* timeouts and backoffs are checked this often */
#define LATE_NS   1000000ull                 /* open loop: a send this far behind is late */
#define BACKOFF_NS \
    10000000ull /* pause after a failed connect, so a dead server
                                        is counted, not hammered in a busy loop */

enum conn_state { C_IDLE, C_CONNECTING, C_ACTIVE, C_BACKOFF, C_DONE };
enum body_mode { B_HEAD, B_LENGTH, B_CHUNKED, B_CLOSE, B_NONE };
enum feed_result { FEED_MORE, FEED_DONE, FEED_ERROR };

struct lg_conn {
    int fd;              /* -1 when closed */
    uint8_t state;       /* enum conn_state */
    uint8_t body;        /* enum body_mode: where the response stands */
    uint8_t close_after; /* socket cannot carry another request */
    uint8_t queued;      /* on the worker's ready list */
    uint8_t reused;      /* the socket carried a response before this request */
    uint8_t answered;    /* a byte of this request's response arrived */
    uint8_t retried;     /* this request was sent again once already */
    uint32_t events;     /* poller mask registered, 0 when not in the set */
    int status;
    size_t woff;                          /* request bytes sent */
    uint64_t start;                       /* ns, when the request was started (timeouts) */
    uint64_t sched;                       /* ns, when it was meant to start (latency) */
    const struct lg_req *req;             /* the one being sent */
    uint64_t wake;                        /* ns, end of a connect backoff */
    uint64_t idle_at;                     /* ns, open loop: when it became free */
    uint64_t left;                        /* body bytes left (B_LENGTH) */
    uint64_t req_in, req_out;             /* bytes of this request, for its record */
    struct oribi_chunked_decoder chunked; /* discard mode */
    char *head;                           /* a response head split over reads, kept here */
    size_t head_len, head_cap;
    struct lg_tls_conn *tls; /* https: the connection's TLS */
    struct lg_conn *next_ready;
};

/* Whether new requests may still start: not stopped, deadline not met. */
static int sending(const struct lg_worker *w, uint64_t now)
{
    const struct oribi_lg *lg = w->lg;
    return !atomic_load_explicit(&lg->stop, memory_order_relaxed) && (!lg->deadline_ns || now < lg->deadline_ns);
}

static int claim(struct lg_worker *w, uint64_t now)
{
    struct oribi_lg *lg = w->lg;
    if (!sending(w, now))
        return 0;
    if (lg->requests)
        return atomic_fetch_add_explicit(&lg->claimed, 1, memory_order_relaxed) < lg->requests;
    return 1;
}

/* A request counts when it was started inside the run's window, whenever
 * its response or its failure comes: the last second's slow responses are
 * the tail, and dropping them would hide it. */
static inline int counting(const struct lg_worker *w, uint64_t started)
{
    return started >= w->lg->count_from_ns && (!w->lg->deadline_ns || started < w->lg->deadline_ns);
}

/* Where in the latency-over-time series a request belongs: its send time. */
static inline uint64_t since(const struct lg_worker *w, const struct lg_conn *c)
{
    return c->sched > w->lg->count_from_ns ? c->sched - w->lg->count_from_ns : 0;
}

static int set_events(struct lg_worker *w, struct lg_conn *c, uint32_t mask)
{
    if (c->events == mask)
        return 0;
    if (oribi_poller_set(w->pfd, c->fd, c, c->events, mask) < 0)
        return -1;
    c->events = mask;
    return 0;
}

static void conn_close(struct lg_worker *w, struct lg_conn *c)
{
    if (c->tls)
        lg_tls_end(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) {
        oribi_poller_closing(w->pfd, c->fd, c->events);
        close(c->fd);
    }
    c->fd = -1;
    c->events = 0;
}

static void push_ready(struct lg_worker *w, struct lg_conn *c)
{
    if (c->queued)
        return;
    c->queued = 1;
    c->next_ready = w->ready;
    w->ready = c;
}

static inline int open_loop(const struct lg_worker *w)
{
    return w->lg->interval_ns != 0;
}

/* A connection with nothing to do: the closed loop starts its next request
 * from the loop, the open loop waits for the schedule. */
static void conn_free(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    if (!open_loop(w)) {
        push_ready(w, c);
    } else if (!c->queued) {
        c->idle_at = now;
        c->queued = 1;
        c->next_ready = w->idle;
        w->idle = c;
    }
}

/* Writes the records kept so far; a failed write is reported once and
 * ends the stream (the run goes on: its report is still right). */
static void output_flush(struct lg_worker *w)
{
    struct oribi_lg *lg = w->lg;
    if (w->olen == 0)
        return;
    pthread_mutex_lock(&lg->output_lock);
    for (size_t off = 0; off < w->olen && !atomic_load(&lg->output_errno);) {
        ssize_t n = write(lg->output_fd, w->obuf + off, w->olen - off);
        if (n > 0)
            off += (size_t)n;
        else if (n == 0 || errno != EINTR)
            atomic_store(&lg->output_errno, n == 0 ? EIO : errno);
    }
    pthread_mutex_unlock(&lg->output_lock);
    w->olen = 0;
}

/* A counted request's record: status 0 and kind its error, or a response. */
static void output(struct lg_worker *w, const struct lg_conn *c, int kind, int err, uint64_t us)
{
    if (w->obuf == NULL)
        return;
    struct oribi_result r = {
        .sent_ns = since(w, c),
        .latency_us = us,
        .bytes_in = c->req_in,
        .bytes_out = c->req_out,
        .status = (uint16_t)(kind < 0 ? c->status : 0),
        .error = (uint8_t)(kind < 0 ? 0 : kind + 1),
        .err_no = (uint8_t)(err > 0 && err < ORIBI_LG_ERRNO_MAX ? err : 0),
        .target = (uint16_t)(c->req - w->lg->reqs),
        .flags = c->retried ? ORIBI_RESULT_RETRIED : 0,
        .type = ORIBI_RESULT_REQUEST,
    };
    oribi_result_encode(&r, w->obuf + w->olen);
    w->olen += ORIBI_RESULT_SIZE;
    if (w->olen == OBUF_SIZE)
        output_flush(w);
}

static void conn_fail(struct lg_worker *w, struct lg_conn *c, int kind, int err, uint64_t now)
{
    if (counting(w, c->start)) {
        w->errors[kind]++;
        /* The cause tells a refused port from EMFILE from a reset. */
        w->causes[kind][err > 0 && err < ORIBI_LG_ERRNO_MAX ? err : 0]++;
        /* A timeout took that long: it belongs in the latencies too. */
        uint64_t us = kind == ORIBI_LG_E_TIMEOUT ? (now - c->sched + 500) / 1000 : 0;
        if (us)
            oribi_hist_record(w->hist, us);
        lg_series_record(&w->series, w->lg->series_ns, since(w, c), us, 1);
        output(w, c, kind, err, us);
    }
    conn_close(w, c);
    if (kind == ORIBI_LG_E_CONNECT) {
        c->state = C_BACKOFF;
        c->wake = now + BACKOFF_NS;
    } else {
        c->state = C_IDLE;
        conn_free(w, c, now);
    }
}

/* 0 connected, 1 in progress, -1 failed. */
static int conn_connect(struct lg_worker *w, struct lg_conn *c)
{
    const struct oribi_lg *lg = w->lg;
    int fd = oribi_socket(lg->addr.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (lg->addr.ss_family != AF_UNIX) {
        /* The request goes out in one write and must not wait for an ACK. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    c->fd = fd;
    c->reused = 0;
    if (connect(fd, (const struct sockaddr *)&lg->addr, lg->addrlen) == 0)
        return 0;
    if (errno == EINPROGRESS)
        return 1;
    /* Includes EAGAIN: a unix socket whose listen backlog is full. */
    int err = errno;
    conn_close(w, c);
    errno = err;
    return -1;
}

static void conn_lost(struct lg_worker *w, struct lg_conn *c, int kind, int err, uint64_t now);

/* send() and recv(), through TLS on an https connection. */
static ssize_t conn_write(struct lg_conn *c, const char *p, size_t n)
{
    return c->tls ? lg_tls_send(c->tls, p, n) : send(c->fd, p, n, ORIBI_MSG_NOSIGNAL | MSG_DONTWAIT);
}

static ssize_t conn_read(struct lg_conn *c, char *p, size_t n)
{
    return c->tls ? lg_tls_recv(c->tls, p, n) : recv(c->fd, p, n, 0);
}

static void conn_send(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    const struct lg_req *req = c->req;
    while (c->woff < req->len) {
        ssize_t n = conn_write(c, req->p + c->woff, req->len - c->woff);
        if (n > 0) {
            c->woff += (size_t)n;
            if (counting(w, c->start)) {
                w->bytes_out += (uint64_t)n;
                c->req_out += (uint64_t)n;
            }
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            conn_lost(w, c, ORIBI_LG_E_WRITE, errno, now);
            return;
        }
    }
    uint32_t mask = ORIBI_POLL_IN | (c->woff < req->len ? ORIBI_POLL_OUT : 0);
    if (set_events(w, c, mask) < 0)
        conn_fail(w, c, ORIBI_LG_E_WRITE, errno, now);
}

/* https, once connected: a handshake step, then the request goes. The
 * connection stays C_CONNECTING (timed, in flight) until it is done. */
static void conn_handshake(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    struct oribi_lg *lg = w->lg;
    c->state = C_CONNECTING;
    if (c->tls == NULL && (c->tls = lg_tls_start(lg->tls, c->fd)) == NULL) {
        conn_fail(w, c, ORIBI_LG_E_TLS, ENOMEM, now);
        return;
    }
    int want_write = 0;
    int r = lg_tls_handshake(c->tls, &want_write);
    if (r == 1) {
        c->state = C_ACTIVE;
        conn_send(w, c, now);
    } else if (r == 0) {
        if (set_events(w, c, want_write ? ORIBI_POLL_OUT : ORIBI_POLL_IN) < 0)
            conn_fail(w, c, ORIBI_LG_E_TLS, errno, now);
    } else {
        /* The first failure's reason goes in the report. */
        if (atomic_exchange(&lg->tls_failed, 1) == 0)
            lg_tls_error(c->tls, lg->tls_error, sizeof(lg->tls_error));
        conn_fail(w, c, ORIBI_LG_E_TLS, 0, now);
    }
}

/* Sends c's request from its first byte, on a new socket if it has none. */
static void conn_go(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    c->body = B_HEAD;
    c->head_len = 0;
    c->close_after = 0;
    c->answered = 0;
    c->woff = 0;
    if (c->fd < 0) {
        int r = conn_connect(w, c);
        if (r < 0) {
            conn_fail(w, c, ORIBI_LG_E_CONNECT, errno, now);
            return;
        }
        if (r > 0) {
            c->state = C_CONNECTING;
            if (set_events(w, c, ORIBI_POLL_OUT) < 0)
                conn_fail(w, c, ORIBI_LG_E_CONNECT, errno, now);
            return;
        }
        if (w->lg->tls) {
            conn_handshake(w, c, now);
            return;
        }
    }
    c->state = C_ACTIVE;
    conn_send(w, c, now);
}

/* Starts a claimed request meant to start at sched. */
static void conn_begin(struct lg_worker *w, struct lg_conn *c, uint64_t now, uint64_t sched)
{
    c->start = now;
    c->sched = sched;
    c->retried = 0;
    c->req_in = c->req_out = 0;
    c->req = &w->lg->reqs[w->next_req];
    if (++w->next_req == w->lg->nreqs)
        w->next_req = 0;
    if (counting(w, now)) {
        w->last_send_ns = now;
        w->sent++;
    }
    conn_go(w, c, now);
}

/*
 * The socket died under a request. If it had carried a response before and
 * not a byte of this one came, the server most likely closed it as idle
 * while the request was on its way: RFC 9112 9.3.1 lets an idempotent
 * request be sent again, once, on a new connection. Anything else fails.
 */
static void conn_lost(struct lg_worker *w, struct lg_conn *c, int kind, int err, uint64_t now)
{
    if (!c->reused || c->answered || c->retried || !c->req->idempotent) {
        conn_fail(w, c, kind, err, now);
        return;
    }
    conn_close(w, c);
    c->retried = 1;
    if (counting(w, c->start))
        w->retried++;
    conn_go(w, c, now);
}

static void conn_start(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    if (!claim(w, now)) {
        conn_close(w, c);
        c->state = C_DONE;
        w->live--;
        return;
    }
    conn_begin(w, c, now, now);
}

/* Open loop: makes every send that is due, while a connection is idle.
 * Those due with none idle wait, and go out late, still timed from when
 * they were due. */
static void schedule(struct lg_worker *w, uint64_t now)
{
    const struct oribi_lg *lg = w->lg;
    while (!w->exhausted && w->idle && w->next_due <= now && sending(w, now)) {
        if (lg->deadline_ns && w->next_due >= lg->deadline_ns)
            break;
        if (!claim(w, now)) { /* only the request count says no here */
            w->exhausted = 1;
            break;
        }
        struct lg_conn *c = w->idle;
        w->idle = c->next_ready;
        c->queued = 0;
        uint64_t due = w->next_due;
        w->next_due = lg_next_due(lg, w->next_due);
        if (now - due > LATE_NS && counting(w, now)) {
            w->late++;
            /* A connection was free in time: the sender itself was slow. */
            if (c->idle_at <= due)
                w->behind++;
        }
        conn_begin(w, c, now, due);
    }
}

/* Keeps the unparsed bytes p[0..n) of a head, p possibly inside c->head. */
static int head_keep(struct lg_conn *c, const char *p, size_t n)
{
    if (n == 0) { /* c->head may still be NULL */
        c->head_len = 0;
        return 0;
    }
    if (n > c->head_cap) {
        /* Only reached when p is outside c->head (in the read buffer):
         * bytes taken from c->head never outgrow it. */
        size_t cap = n < 4096 ? 4096 : n;
        char *h = realloc(c->head, cap);
        if (h == NULL)
            return -1;
        c->head = h;
        c->head_cap = cap;
    }
    memmove(c->head, p, n);
    c->head_len = n;
    return 0;
}

static int head_append(struct lg_conn *c, const char *p, size_t n)
{
    /* head_len <= HEAD_MAX and n <= RBUF_SIZE: bounded without a check. */
    size_t need = c->head_len + n;
    if (need > c->head_cap) {
        char *h = realloc(c->head, need);
        if (h == NULL)
            return -1;
        c->head = h;
        c->head_cap = need;
    }
    memcpy(c->head + c->head_len, p, n);
    c->head_len = need;
    return 0;
}

/* Advances the response framing over p[0..n) freshly read. */
static enum feed_result feed(struct lg_worker *w, struct lg_conn *c, const char *p, size_t n)
{
    if (c->body == B_HEAD && c->head_len) {
        if (head_append(c, p, n) < 0)
            return FEED_ERROR;
        p = c->head;
        n = c->head_len;
        c->head_len = 0; /* the buffer is now input; head_keep re-fills it */
    }
    for (;;) {
        switch (c->body) {
        case B_HEAD: {
            struct oribi_response_head r = {.headers = NULL}; /* fields not kept */
            int h = oribi_parse_response(p, n, c->req->is_head, &r);
            if (h == ORIBI_PARSE_INCOMPLETE) {
                if (n > HEAD_MAX || head_keep(c, p, n) < 0)
                    return FEED_ERROR;
                return FEED_MORE;
            }
            if (h < 0)
                return FEED_ERROR;
            p += h;
            n -= (size_t)h;
            if (r.status < 200) {
                /* 100/102/103 precede the real response; 101 would take the
                 * connection out of HTTP, which no request of ours asks for. */
                if (r.status == 101)
                    return FEED_ERROR;
                continue;
            }
            c->status = r.status;
            c->close_after = (uint8_t)!r.keepalive;
            switch (r.framing) {
            case ORIBI_FRAMING_NONE:
                c->body = B_NONE;
                break;
            case ORIBI_FRAMING_CHUNKED:
                memset(&c->chunked, 0, sizeof(c->chunked));
                c->body = B_CHUNKED;
                break;
            case ORIBI_FRAMING_LENGTH:
                c->left = (uint64_t)r.content_length;
                c->body = c->left ? B_LENGTH : B_NONE;
                break;
            default:
                c->body = B_CLOSE;
                c->close_after = 1;
            }
            continue;
        }
        case B_LENGTH:
            if (n < c->left) {
                c->left -= n;
                return FEED_MORE;
            }
            p += c->left;
            n -= (size_t)c->left;
            c->left = 0;
            c->body = B_NONE;
            continue;
        case B_CHUNKED: {
            size_t data;
            ssize_t k = oribi_discard_chunked(&c->chunked, p, n, &data);
            if (k == ORIBI_CHUNKED_INCOMPLETE)
                return FEED_MORE;
            if (k < 0)
                return FEED_ERROR;
            p += k;
            n -= (size_t)k;
            c->body = B_NONE;
            continue;
        }
        case B_CLOSE:
            return FEED_MORE; /* ends at EOF */
        default:              /* B_NONE */
            /* One request in flight: bytes past its response are a server
             * bug, and would be misread as the next response. */
            return n ? FEED_ERROR : FEED_DONE;
        }
    }
}

static void conn_complete(struct lg_worker *w, struct lg_conn *c)
{
    const struct oribi_lg *lg = w->lg;
    uint64_t now = lg_now_ns();
    if (counting(w, c->start)) {
        uint64_t us = (now - c->sched + 500) / 1000;
        oribi_hist_record(w->hist, us);
        lg_series_record(&w->series, lg->series_ns, since(w, c), us, 0);
        w->requests++;
        w->status[c->status]++;
        output(w, c, -1, 0, us);
    }
    /* A response that came before the whole request was sent leaves the
     * socket mid-request: it cannot be reused either. */
    if (!lg->keepalive || c->close_after || c->woff < c->req->len)
        conn_close(w, c);
    c->reused = 1;
    c->state = C_IDLE;
    if (open_loop(w))
        conn_free(w, c, now);
    else
        conn_start(w, c, now);
}

/* Reads what has come. TLS may hold decrypted bytes where the poller cannot see
 * them: read on while it does and the response wants more. */
static void conn_readable(struct lg_worker *w, struct lg_conn *c, uint64_t now)
{
    for (;;) {
        ssize_t n = conn_read(c, w->rbuf, RBUF_SIZE);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                conn_lost(w, c, ORIBI_LG_E_READ, errno, now);
            return;
        }
        if (n == 0) {
            if (c->body == B_CLOSE) {
                c->close_after = 1;
                conn_complete(w, c);
            } else {
                conn_lost(w, c, ORIBI_LG_E_READ, 0, now);
            }
            return;
        }
        c->answered = 1;
        if (counting(w, c->start)) {
            w->bytes_in += (uint64_t)n;
            c->req_in += (uint64_t)n;
        }
        switch (feed(w, c, w->rbuf, (size_t)n)) {
        case FEED_MORE:
            if (c->tls && lg_tls_pending(c->tls))
                continue;
            return;
        case FEED_DONE:
            conn_complete(w, c);
            return;
        case FEED_ERROR:
            conn_fail(w, c, ORIBI_LG_E_PARSE, 0, now);
            return;
        }
    }
}

/* err: the socket error the poller took, or 0 (os/poller.h). */
static void conn_event(struct lg_worker *w, struct lg_conn *c, uint32_t events, int err, uint64_t now)
{
    if (c->state == C_CONNECTING && c->tls) {
        conn_handshake(w, c, now);
        return;
    }
    if (c->state == C_CONNECTING) {
        int so = 0;
        socklen_t len = sizeof(so);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0)
            so = errno;
        if (so || err) {
            conn_fail(w, c, ORIBI_LG_E_CONNECT, so ? so : err, now);
            return;
        }
        if (w->lg->tls) {
            conn_handshake(w, c, now);
            return;
        }
        c->state = C_ACTIVE;
        conn_send(w, c, now);
        return;
    }
    if (c->state == C_IDLE && c->fd >= 0) {
        /* Open loop, between requests: the server closed the connection
         * (its idle timeout) or sent what nobody asked for. Either way the
         * socket is done; level-triggered, it would wake the loop forever.
         * Over TLS it may be a record for TLS itself (a session ticket):
         * read, and keep the connection if that was all. */
        if (c->tls && conn_read(c, w->rbuf, RBUF_SIZE) < 0 && errno == EAGAIN)
            return;
        conn_close(w, c);
        return;
    }
    if (c->state != C_ACTIVE)
        return;
    if ((events & ORIBI_POLL_OUT) && c->woff < c->req->len) {
        conn_send(w, c, now);
        if (c->state != C_ACTIVE)
            return;
    }
    if (events & (ORIBI_POLL_IN | ORIBI_POLL_ERR))
        conn_readable(w, c, now);
}

static void sweep(struct lg_worker *w, uint64_t now)
{
    for (unsigned i = 0; i < w->nconns; i++) {
        struct lg_conn *c = &w->conns[i];
        if ((c->state == C_CONNECTING || c->state == C_ACTIVE) && now - c->start >= w->lg->timeout_ns) {
            conn_fail(w, c, ORIBI_LG_E_TIMEOUT, 0, now);
        } else if (c->state == C_BACKOFF && now >= c->wake) {
            c->state = C_IDLE;
            conn_free(w, c, now);
        }
    }
}

static void publish(struct lg_worker *w)
{
    uint64_t failed = 0;
    for (int k = 0; k < ORIBI_LG_E_COUNT; k++)
        failed += w->errors[k];
    output_flush(w); /* every 10 ms or so: a stream as the run goes */
    struct lg_progress *p = &w->lg->progress[w->index];
    atomic_store_explicit(&p->done, w->requests, memory_order_relaxed);
    atomic_store_explicit(&p->failed, failed, memory_order_relaxed);
}

/* Whether a request of w's is in flight: connecting or awaiting its response. */
static int in_flight(const struct lg_worker *w)
{
    for (unsigned i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_CONNECTING || w->conns[i].state == C_ACTIVE)
            return 1;
    return 0;
}

/* Whether a request of w's is in flight or a connection is backing off. */
static int busy(const struct lg_worker *w)
{
    for (unsigned i = 0; i < w->nconns; i++)
        if (w->conns[i].state != C_IDLE && w->conns[i].state != C_DONE)
            return 1;
    return 0;
}

static void run_ready(struct lg_worker *w)
{
    while (w->ready) {
        struct lg_conn *c = w->ready;
        w->ready = c->next_ready;
        c->queued = 0;
        if (c->state == C_IDLE)
            conn_start(w, c, lg_now_ns()); /* fresh clock: this may loop a while */
    }
}

/* Waits until t at the latest: to the nanosecond where the poller can
 * (kqueue; epoll_pwait2, Linux 5.11), so open-loop sends leave on time;
 * else in milliseconds, rounded down, the rest spun. */
static int wait_events(struct lg_worker *w, struct oribi_poll_batch *b, uint64_t now, uint64_t t)
{
    return oribi_poller_wait(w->pfd, b, (int64_t)(t > now ? t - now : 0));
}

/* Sends of a thread's schedule from `due` on and before `end`, leaving out
 * the warm-up's (not counted). */
static uint64_t unsent(const struct oribi_lg *lg, uint64_t due, uint64_t end)
{
    if (lg->stages == NULL) {
        uint64_t step = lg->interval_ns;
        if (due < lg->count_from_ns)
            due += (lg->count_from_ns - due + step - 1) / step * step;
        return due < end ? (end - due - 1) / step + 1 : 0;
    }
    uint64_t n = 0;
    for (; due < end; due = lg_next_due(lg, due))
        n += due >= lg->count_from_ns;
    return n;
}

void *lg_worker_main(void *arg)
{
    struct lg_worker *w = arg;
    struct oribi_lg *lg = w->lg;
    struct oribi_poll_batch batch;

    uint64_t now = lg_now_ns(), next_sweep = now + SWEEP_NS;
    for (unsigned i = w->nconns; i-- > 0;)
        conn_free(w, &w->conns[i], 0); /* open loop: conns[0] on top */
    for (;;) {
        run_ready(w);
        now = lg_now_ns();
        if (open_loop(w))
            schedule(w, now);
        /* Past the deadline nothing new starts, but what is in flight is
         * awaited (each within its timeout) and counted, as vegeta does. */
        if (atomic_load_explicit(&lg->stop, memory_order_relaxed) || w->live == 0 ||
            (lg->deadline_ns && now >= lg->deadline_ns && !in_flight(w)) || (w->exhausted && !busy(w)))
            break;
        if (now >= next_sweep) {
            sweep(w, now);
            publish(w);
            next_sweep = now + SWEEP_NS;
            continue;
        }
        uint64_t until = next_sweep;
        if (sending(w, now)) {
            if (lg->deadline_ns && lg->deadline_ns < until)
                until = lg->deadline_ns;
            if (open_loop(w) && w->idle && !w->exhausted && w->next_due < until)
                until = w->next_due;
        }
        int k = wait_events(w, &batch, now, until);
        now = lg_now_ns();
        for (int i = 0; i < k; i++)
            if (oribi_poll_data(&batch, i) != NULL) /* NULL: the stop wakeup */
                conn_event(w, oribi_poll_data(&batch, i), oribi_poll_events(&batch, i), oribi_poll_error(&batch, i),
                           now);
    }
    w->end_ns = now;
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        w->cpu_ns = (uint64_t)cpu.tv_sec * 1000000000ull + (uint64_t)cpu.tv_nsec;
    publish(w);
    if (open_loop(w) && !w->exhausted) {
        /* Sends due before the end (the deadline, or a stop) never made. */
        uint64_t end = lg->deadline_ns && lg->deadline_ns < now ? lg->deadline_ns : now;
        w->dropped = unsent(lg, w->next_due, end);
    }
    for (unsigned i = 0; i < w->nconns; i++)
        conn_close(w, &w->conns[i]);
    return NULL;
}

void lg_worker_free(struct lg_worker *w)
{
    if (w->pfd >= 0)
        close(w->pfd);
    if (w->conns)
        for (unsigned j = 0; j < w->nconns; j++)
            free(w->conns[j].head);
    free(w->conns);
    free(w->rbuf);
    free(w->hist);
    free(w->series.intervals);
    free(w->obuf);
}

int lg_worker_init(struct oribi_lg *lg, struct lg_worker *w, unsigned nconns)
{
    w->lg = lg;
    w->nconns = w->live = nconns;
    w->pfd = oribi_poller_open();
    w->conns = calloc(nconns, sizeof(*w->conns));
    w->rbuf = malloc(RBUF_SIZE);
    w->hist = malloc(sizeof(*w->hist));
    w->obuf = lg->output_fd > 0 ? malloc(OBUF_SIZE) : NULL;
    if (w->pfd < 0 || !w->conns || !w->rbuf || !w->hist || (lg->output_fd > 0 && !w->obuf))
        return -1;
    oribi_hist_init(w->hist);
    for (unsigned j = 0; j < nconns; j++)
        w->conns[j].fd = -1;
    return oribi_poller_set(w->pfd, lg->stop_wake.rfd, NULL, 0, ORIBI_POLL_IN);
}
