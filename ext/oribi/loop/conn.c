/*
 * A connection's life in the loop: taken from the free list, read and
 * parsed (head, then body), queued for the app, answered by the loop itself
 * when the request is bad (reject, then a lingering close), kept alive or
 * closed after its response, and put back.
 */
#include "loop/internal.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop/body.h"
#include "os/clock.h"
#include "loop/log.h"
#include "loop/scheduler.h"
#include "loop/transport.h"
#include "http/proxy_protocol.h"
#include "http/response.h"

/* What a conn between requests (idle, or on the free list) keeps of its
 * buffers: a read buffer of the size of a first read, and no write buffer.
 * A request's large head or body, or a response the socket did not take at
 * once, made them grow; held for the next request they would let clients
 * that send one request each pin megabytes apiece (docs/HARDENING.md,
 * "What a connection keeps"). */
#define CONN_BUF_IDLE 4096

/* Gives back what the conn's buffers grew to for its last request, once
 * nothing is in them: no pipelined bytes read, no output kept. */
static void conn_trim(struct oribi_conn *c)
{
    if (c->len)
        return;
    if (c->cap > CONN_BUF_IDLE) {
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
    if (c->wlen == c->woff && c->wbuf) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wlen = c->woff = c->wcap = 0;
    }
}

/* A request's fields, allocated when there were more than fields[] holds. */
static void drop_fields(struct oribi_conn *c)
{
    if (c->headers != c->fields)
        free(c->headers);
    c->headers = c->fields;
    c->req.headers = NULL;
    c->req.num_headers = 0;
}

/* The head parsed into the loop's array: its fields become the conn's. */
static int keep_fields(struct oribi_conn *c)
{
    const struct oribi_header *parsed = c->req.headers;
    size_t n = c->req.num_headers;
    drop_fields(c);
    if (n > ORIBI_CONN_FIELDS && !(c->headers = malloc(n * sizeof(*c->headers)))) {
        c->headers = c->fields;
        return -1;
    }
    memcpy(c->headers, parsed, n * sizeof(*c->headers));
    c->req.headers = c->headers;
    c->req.num_headers = n;
    return 0;
}

struct oribi_conn *conn_new(struct oribi_loop *loop, int fd)
{
    struct oribi_conn *c = loop->free_list;
    if (c) {
        loop->free_list = c->qnext;
    } else {
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
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
    c->watched = c->may_read = c->keepalive = c->peer_hup = c->kept = 0;
    c->cork = c->corked = c->proxy = 0;
    c->piped_us = 0;
    c->len = c->last_len = c->head_len = c->rest_off = 0;
    c->body_fd = -1;
    c->wlen = c->woff = 0;
    c->file_fd = -1;
    c->file_spooled = 0;
    c->budget = &loop->budget;
    c->requests = 0;
    c->seen_us = 0;
    c->qnext = NULL;
    loop->by_fd[fd] = c;
    loop->nconns++;
    if (loop->shared)
        oribi_score_conns(loop->score, loop->shared, 1);
    return c;
}

/* Puts the conn back on the free list; its fd is closed unless it was
 * handed to the app. */
static void conn_release(struct oribi_loop *loop, struct oribi_conn *c, int close_fd)
{
    timer_unlink(loop, c);
    if (c->body_fd >= 0)
        close(c->body_fd);
    c->body_fd = -1;
    oribi_conn_discard_output(c);
    if (close_fd) {
        if (c->watched)
            oribi_poller_closing(loop->pfd, c->fd, CONN_EVENTS);
        close(c->fd);
    }
    c->watched = 0;
    if (loop->by_fd[c->fd] == c) /* a detached fd may be another conn's already */
        loop->by_fd[c->fd] = NULL;
    c->fd = -1;
    c->state = CONN_CLOSED;
    c->gen++;
    c->len = 0;
    conn_trim(c);
    drop_fields(c);
    oribi_tls_free(c);
    if (c->kept)
        loop->nkept--;
    c->kept = 0;
    c->qnext = loop->free_list;
    loop->free_list = c;
    loop->nconns--;
    if (loop->shared)
        oribi_score_conns(loop->score, loop->shared, -1);
    spare_restore(loop); /* the fd it gave up may be free again */
}

void conn_close(struct oribi_loop *loop, struct oribi_conn *c)
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
    if (c->watched)
        oribi_poller_set(loop->pfd, c->fd, NULL, CONN_EVENTS, 0);
    c->watched = 0;
}

static int conn_watch(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->watched)
        return 0;
    if (oribi_poller_set(loop->pfd, c->fd, c, 0, CONN_EVENTS) < 0 &&
        (errno != EMFILE || !spare_spend(loop) || oribi_poller_set(loop->pfd, c->fd, c, 0, CONN_EVENTS) < 0))
        return -1;
    c->watched = 1;
    c->may_read = 1; /* bytes may have come before the watch */
    return 0;
}

/* Closing with unread input makes the kernel send RST, which can destroy
 * the response before the client reads it: shut the write side and drain. */
static void conn_linger(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (oribi_io_shutdown(c) < 0 || conn_watch(loop, c) < 0) {
        conn_close(loop, c);
        return;
    }
    c->state = CONN_LINGER;
    c->len = 0;
    timer_arm(loop, c, TIMER_LINGER);
}

/* The peer as a log line names it: an address, or "unix". */
static void peer_text(const struct oribi_conn *c, char out[INET6_ADDRSTRLEN])
{
    const struct sockaddr *sa = (const struct sockaddr *)&c->peer;
    strcpy(out, "unix");
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, INET6_ADDRSTRLEN);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, INET6_ADDRSTRLEN);
}

/* A 5xx the loop answers for a request it will not serve (a 500 is logged
 * where it happens, with its errno): who sent it, and why. */
static void log_refusal(struct oribi_conn *c, int status)
{
    char peer[INET6_ADDRSTRLEN];
    peer_text(c, peer);
    oribi_log("answered %d to %s: %s", status, peer,
              status == 501 ? "a transfer coding other than chunked" : "an HTTP major version other than 1");
}

static void answer_and_close(struct oribi_loop *loop, struct oribi_conn *c, const char *out, size_t n);

void conn_reject(struct oribi_loop *loop, struct oribi_conn *c, int status)
{
    if (status == 501 || status == 505)
        log_refusal(c, status);
    char out[512];
    size_t n =
        oribi_error_response(out, sizeof(out), status, &loop->date, time(NULL), 0, oribi_is_head(c->buf, c->len));
    answer_and_close(loop, c, out, n);
}

/* The loop's last answer on c: written (or kept for the socket), then the
 * rest of the client's bytes read and dropped until it closes. */
static void answer_and_close(struct oribi_loop *loop, struct oribi_conn *c, const char *out, size_t n)
{
    struct iovec iov = {(void *)out, n};
    loop->rejected++;
    oribi_conn_no_keepalive(c);
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

/* A plain HTTP request on a TLS listener: answered in plain HTTP, with
 * what went wrong, as nginx does, and closed. */
static void conn_plain_on_tls(struct oribi_loop *loop, struct oribi_conn *c)
{
    static const char out[] = "HTTP/1.1 400 Bad Request\r\n"
                              "Content-Type: text/plain\r\n"
                              "Content-Length: 46\r\n"
                              "Connection: close\r\n\r\n"
                              "The plain HTTP request was sent to HTTPS port\n";
    oribi_tls_free(c); /* from here the socket itself */
    c->len = c->rest_off = 0;
    answer_and_close(loop, c, out, sizeof(out) - 1);
}

static void conn_answered(struct oribi_loop *loop, struct oribi_conn *c);

/* An unmet Expect on a bodyless request: the head is valid and nothing
 * follows it but the next request, so answer 417 and go on. */
static int conn_refuse_expectation(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->req.chunked || c->req.content_length > 0 || !keepalive_decide(loop, c))
        return 0;
    char out[512];
    size_t n = oribi_error_response(out, sizeof(out), 417, &loop->date, time(NULL), 1, oribi_is_head(c->buf, c->len));
    struct iovec iov = {out, n};
    loop->rejected++;
    if (oribi_conn_write(c, &iov, 1) < 0) {
        conn_close(loop, c);
        return 1;
    }
    c->head_len = c->rest_off = c->req.head_len;
    conn_answered(loop, c);
    return 1;
}

/* The request is complete: the app's, when the scheduler hands it out. */
static void conn_ready(struct oribi_loop *loop, struct oribi_conn *c)
{
    timer_unlink(loop, c);
    c->state = CONN_READY;
    oribi_sched_queue(&loop->sched, c, oribi_mono_us());
}

/* A connection on a proxy_protocol listener that did not open with a
 * valid PROXY header (none, garbage, too long, cut short by the header
 * timeout) is closed without an answer: its peer is not the proxy, or the
 * proxy is misconfigured, and an HTTP answer would reach a client as the
 * app's. Counted, and told at most every SHED_LOG_MS with the peer of the
 * last one (the socket's: the proxy, or whoever connected), never its bytes. */
static void conn_refuse_proxy(struct oribi_loop *loop, struct oribi_conn *c, const char *why)
{
    char peer[INET6_ADDRSTRLEN];
    peer_text(c, peer);
    conn_close(loop, c);
    loop->no_proxy.count++;
    uint64_t n = oribi_tally_due(&loop->no_proxy, loop->now, SHED_LOG_MS);
    if (n)
        oribi_log("closed %llu connection(s) on a proxy_protocol listener without a valid PROXY header (the last "
                  "from %s: %s)",
                  (unsigned long long)n, peer, why);
}

/* The PROXY header a proxy_protocol listener's connection opens with: its
 * address becomes the conn's peer (the client's, for REMOTE_ADDR, the
 * access log and trusted_proxies), and the bytes after it are the first
 * request. 1 when read, 0 while more must come (within header_timeout),
 * -1 when the conn was closed. */
static int conn_proxy_header(struct oribi_loop *loop, struct oribi_conn *c)
{
    struct oribi_proxy_header h;
    int r = oribi_proxy_parse(c->buf, c->len, c->proxy, &h);
    if (r == ORIBI_PARSE_INCOMPLETE)
        return 0;
    if (r < 0) {
        conn_refuse_proxy(loop, c, "not a PROXY header, or a malformed one");
        return -1;
    }
    if (h.family == ORIBI_PROXY_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&c->peer;
        memset(&c->peer, 0, sizeof(c->peer));
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, h.src, 4);
        a->sin_port = htons(h.src_port);
        c->peer_len = sizeof(*a);
    } else if (h.family == ORIBI_PROXY_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&c->peer;
        memset(&c->peer, 0, sizeof(c->peer));
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, h.src, 16);
        a->sin6_port = htons(h.src_port);
        c->peer_len = sizeof(*a);
    }
    c->proxy = 0;
    c->len -= (size_t)r;
    memmove(c->buf, c->buf + r, c->len);
    if (c->tls && c->len) { /* the bytes after it open the TLS handshake: TLS reads them first */
        if (oribi_tls_preread(c, c->buf, c->len) < 0) {
            conn_close(loop, c);
            return -1;
        }
        c->len = 0;
        c->may_read = 1;
    }
    return 1;
}

/* A head is complete: check what the loop must answer itself, then read the body. */
static void head_done(struct oribi_loop *loop, struct oribi_conn *c, int head_len)
{
    c->head_len = (size_t)head_len;
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
    if (r == REQ_BODY_DONE) {
        conn_ready(loop, c);
    } else if (r == REQ_BODY_MORE) {
        c->state = CONN_BODY;
        c->body_start = loop->now;
        timer_arm(loop, c, TIMER_BODY);
        if (loop->opt.min_body_rate && !loop->rate_check_at)
            loop->rate_check_at = loop->now + ORIBI_BODY_RATE_CHECK_MS;
    } else {
        conn_reject(loop, c, r);
    }
}

/* Acts on the bytes in c->buf according to the state; a request they
 * complete joins the ready queue (oribi_sched_queue). */
static void conn_process(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->state == CONN_HEAD) {
        if (c->len == 0)
            return;
        if (c->timer != TIMER_HEAD)
            timer_arm(loop, c, TIMER_HEAD); /* the header timeout runs from the first byte */
        if (c->proxy && (conn_proxy_header(loop, c) <= 0 || c->len == 0))
            return;
        c->req.headers = loop->fields;
        c->req.num_headers = loop->opt.limits.max_headers;
        int r = oribi_parse_request(c->buf, c->len, c->last_len, &c->req, &loop->opt.limits);
        if (r > 0 && keep_fields(c) < 0)
            conn_close(loop, c);
        else if (r > 0)
            head_done(loop, c, r);
        else if (r == ORIBI_PARSE_INCOMPLETE)
            c->last_len = c->len;
        else if (!(c->req.status == 417 && conn_refuse_expectation(loop, c)))
            conn_reject(loop, c, c->req.status);
    } else if (c->state == CONN_BODY) {
        int r = oribi_body_feed(loop, c);
        if (r == REQ_BODY_DONE) {
            conn_ready(loop, c);
        } else if (r == REQ_BODY_MORE) {
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

/* Reads while the socket has bytes and the conn wants them; a request
 * they complete joins the ready queue (oribi_sched_queue). */
void conn_read(struct oribi_loop *loop, struct oribi_conn *c)
{
    while (c->may_read && (c->state == CONN_HEAD || c->state == CONN_BODY || c->state == CONN_LINGER)) {
        size_t want = c->state == CONN_HEAD ? 4096 : 16384;
        if (c->state == CONN_HEAD) {
            size_t max = loop->opt.limits.max_request_line + loop->opt.limits.max_header_bytes + 1024 +
                         (c->proxy ? ORIBI_PROXY_V2_MAX : 0);
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
        ssize_t n = oribi_io_read(c, c->buf + c->len, space);
        if (n > 0) {
            if (!c->seen_us && c->state == CONN_HEAD && c->len == 0)
                c->seen_us = oribi_mono_us(); /* the first byte of a next request */
            c->len += (size_t)n;
            /* A short read usually means the socket is drained, but when
             * the peer's FIN came in the same edge the EOF is still
             * unread, and edge-triggered epoll reports it only once: a
             * client that aborts mid-body would hold its fd (and its
             * tmpfile) until the body timeout. */
            c->may_read = (size_t)n == space || c->peer_hup || (c->tls && !oribi_tls_drained(c));
            conn_process(loop, c);
        } else if (n == 0) {
            /* EOF. Requests the client sent whole before it ended its side
             * (a pipeline, then a half-close) are still answered: bytes in
             * the buffer the parser has not seen yet come first (the next
             * read finds the EOF again). */
            if (c->state == CONN_HEAD && c->len > c->last_len) {
                conn_process(loop, c);
                if (c->state != CONN_HEAD && c->state != CONN_BODY)
                    return; /* queued, or answered by the loop */
            }
            /* An idle or partial request just ends; a half-sent body is
             * never handed to the app. Answers the socket did not take all
             * of yet go out first. */
            if (c->wlen > c->woff && c->state != CONN_LINGER) {
                oribi_conn_no_keepalive(c);
                c->len = c->rest_off = 0;
                c->may_read = 0;
                c->state = CONN_FLUSH;
                if (conn_watch(loop, c) < 0)
                    conn_close(loop, c);
                else
                    timer_arm(loop, c, TIMER_WRITE);
                return;
            }
            conn_close(loop, c);
            return;
        } else if (errno == EAGAIN) {
            c->may_read = 0;
        } else if (errno != EINTR) {
            if (c->tls && c->plain_on_tls)
                conn_plain_on_tls(loop, c);
            else
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
    if (!c->keepalive) {
        if (c->len > c->rest_off || c->may_read)
            conn_linger(loop, c);
        else
            conn_close(loop, c);
        return;
    }
    if (!c->kept) {
        c->kept = 1;
        loop->nkept++;
    }
    memmove(c->buf, c->buf + c->rest_off, c->len - c->rest_off);
    c->len -= c->rest_off;
    c->rest_off = c->head_len = c->last_len = 0;
    c->state = CONN_HEAD;
    conn_trim(c); /* idle unless a pipelined request is there */
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
    if (oribi_pending_push(&loop->pending, &loop->npending, &loop->pending_cap, c, c->gen) < 0)
        conn_close(loop, c);
}

/* Connections whose response is out: next pipelined request, or read on. */
void drain_pending(struct oribi_loop *loop)
{
    while (loop->npending) {
        struct oribi_pending p = loop->pending[--loop->npending];
        struct oribi_conn *c = p.conn;
        if (c->gen != p.gen || c->state != CONN_HEAD)
            continue; /* closed (and maybe reused) since */
        if (c->len)
            conn_process(loop, c);
        if (c->corked && c->state != CONN_READY && cork_release(c) < 0) {
            conn_close(loop, c); /* the rest of the pipeline was not here yet */
            continue;
        }
        if (c->state == CONN_HEAD || c->state == CONN_BODY) {
            if (conn_watch(loop, c) < 0)
                conn_close(loop, c);
            else
                conn_read(loop, c);
        }
    }
}

/* What the poller said about reading: bytes or a hangup to read to. A TLS
 * handshake reads on once the socket takes what it had to write. */
static int note_readable(struct oribi_conn *c, uint32_t events)
{
    uint32_t readable = ORIBI_POLL_IN | ORIBI_POLL_HUP | ORIBI_POLL_ERR;
    if (c->tls && oribi_tls_handshaking(c))
        readable |= ORIBI_POLL_OUT;
    if (!(events & readable))
        return 0;
    c->may_read = 1;
    if (events & (ORIBI_POLL_HUP | ORIBI_POLL_ERR))
        c->peer_hup = 1;
    return 1;
}

void oribi_loop_finish(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->body_fd >= 0) {
        close(c->body_fd);
        c->body_fd = -1;
    }
    if (c->app_events) {
        /* The loop ran while the app had the conn (threads) and took these
         * edges: act on them now, none may come again. */
        note_readable(c, c->app_events);
        if ((c->app_events & ORIBI_POLL_OUT) && oribi_conn_pending(c) && oribi_conn_send_pending(c) < 0) {
            conn_close(loop, c);
            return;
        }
        c->app_events = 0;
    }
    if (cork_finish(loop, c) < 0) {
        conn_close(loop, c);
        return;
    }
    conn_answered(loop, c);
}

/* A response is written, or kept for the socket: what it did not take goes
 * as it can, then the connection's next request (conn_after_response). The
 * app's responses come here through oribi_loop_finish, the loop's own
 * answers that keep the connection (417) straight. c->keepalive as the
 * response said, not loop->stopping again: a response that said
 * keep-alive (the drain began while it was written, or while an app thread
 * handed it back) gets the idle grace of oribi_loop_stop, so that the
 * request the client may be sending right now is still answered. */
static void conn_answered(struct oribi_loop *loop, struct oribi_conn *c)
{
    c->requests++;
    if (oribi_conn_pending(c) && !c->corked) {
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

void on_conn_event(struct oribi_loop *loop, struct oribi_conn *c, uint32_t events)
{
    if (c->state == CONN_APP) { /* an app thread writes to it: kept for later */
        c->app_events |= events;
        return;
    }
    if ((events & ORIBI_POLL_OUT) && c->state == CONN_FLUSH) {
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
    } else if ((events & ORIBI_POLL_OUT) && !c->corked && c->wlen > c->woff && oribi_conn_flush(c) < 0) {
        conn_close(loop, c); /* pipelined responses the socket did not take all of (flush_corked) */
        return;
    }
    if (note_readable(c, events))
        conn_read(loop, c);
}

/* Its timer ran out (timer_expired): silence for a connection that never
 * sent a byte; 408 for one caught mid-request (slowloris); plain close
 * otherwise. */
void conn_timed_out(struct oribi_loop *loop, struct oribi_conn *c, int kind)
{
    if (c->proxy && c->len > 0)
        conn_refuse_proxy(loop, c, "cut short by header_timeout");
    else if ((kind == TIMER_HEAD && c->len > 0) || kind == TIMER_BODY)
        conn_reject(loop, c, 408);
    else
        conn_close(loop, c);
}

int64_t body_rates_deadline(const struct oribi_loop *loop)
{
    return loop->rate_check_at ? loop->rate_check_at : -1;
}

/* Bodies that came slower than min_body_rate on average since they began,
 * once past the grace, get 408 and a close: a connection past its head is
 * never shed, so clients trickling bodies just above what body_timeout
 * catches (8 KiB per timeout) could otherwise hold every connection ("slow
 * POST"). Every body in progress is on the body timer list. */
void conn_check_body_rates(struct oribi_loop *loop)
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
    uint64_t n = oribi_tally_due(&loop->slow_bodies, loop->now, SHED_LOG_MS);
    if (n)
        oribi_log("answered 408 to %llu request(s) whose body came slower than min_body_rate (%lld bytes/s)",
                  (unsigned long long)n, (long long)loop->opt.min_body_rate);
    if (loop->timers[TIMER_BODY][0])
        loop->rate_check_at = loop->now + ORIBI_BODY_RATE_CHECK_MS;
}
