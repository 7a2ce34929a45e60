/*
 * Load generator engine (see loadgen.h). Each thread owns an epoll set and a
 * fixed slice of the connections; threads share nothing while running but
 * the read-only request, the stop flag and, in request-count mode, an atomic
 * counter of claimed requests. Statistics are per thread and merged at the
 * end, so the hot path takes no lock.
 *
 * A connection's cycle: claim a request, connect if it has no socket, send,
 * read until the response is framed, record, then start the next cycle at
 * once, on the same socket when both sides allow it. The next request is
 * written straight after the response is read, without waiting for an
 * EPOLLOUT round trip: keep-alive costs one send and one recv per request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "loadgen.h"

#define RBUF_SIZE      65536         /* one read per readiness event, shared per thread */
#define HEAD_MAX       65536         /* response heads beyond this are parse errors */
#define MAX_EVENTS     256
#define SWEEP_NS       10000000ull   /* timeouts and backoffs are checked this often */
#define BACKOFF_NS     10000000ull   /* pause after a failed connect, so a dead server
                                        is counted, not hammered in a busy loop */
#define PROBE_MS       1000          /* per address when a name has several */

enum conn_state { C_IDLE, C_CONNECTING, C_ACTIVE, C_BACKOFF, C_DONE };
enum body_mode { B_HEAD, B_LENGTH, B_CHUNKED, B_CLOSE, B_NONE };
enum feed_result { FEED_MORE, FEED_DONE, FEED_ERROR };

struct conn {
    int fd;                  /* -1 when closed */
    uint8_t state;           /* enum conn_state */
    uint8_t body;            /* enum body_mode: where the response stands */
    uint8_t close_after;     /* socket cannot carry another request */
    uint8_t queued;          /* on the worker's ready list */
    uint32_t events;         /* epoll mask registered, 0 when not in the set */
    int status;
    size_t woff;             /* request bytes sent */
    uint64_t start;          /* ns, when the request was claimed */
    uint64_t wake;           /* ns, end of a connect backoff */
    uint64_t left;           /* body bytes left (B_LENGTH) */
    struct oribi_lg_chunked chunked;
    char *head;              /* a response head split over reads, kept here */
    size_t head_len, head_cap;
    struct conn *next_ready;
};

struct worker {
    struct oribi_lg *lg;
    pthread_t tid;
    int ep;
    struct conn *conns;
    unsigned nconns, live;   /* live: connections not C_DONE */
    struct conn *ready;      /* to (re)start from the loop, not from deep calls */
    char *rbuf;
    uint64_t end_ns;
    uint64_t requests, errors[ORIBI_LG_E_COUNT], bytes_in, bytes_out;
    uint64_t status[600];
    struct oribi_hist *hist;
};

struct oribi_lg {
    char *host, *port, *unix_path, *request;
    size_t request_len;
    unsigned threads, connections;
    uint64_t requests, duration_ns, timeout_ns;
    int keepalive, is_head;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int stopfd;                  /* eventfd, readable once stopped: wakes every loop */
    atomic_int stop;
    atomic_uint_fast64_t claimed;
    uint64_t start_ns, deadline_ns; /* deadline 0: none */
};

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int claim(struct worker *w, uint64_t now)
{
    struct oribi_lg *lg = w->lg;
    if (atomic_load_explicit(&lg->stop, memory_order_relaxed))
        return 0;
    if (lg->deadline_ns && now >= lg->deadline_ns)
        return 0;
    if (lg->requests)
        return atomic_fetch_add_explicit(&lg->claimed, 1, memory_order_relaxed) < lg->requests;
    return 1;
}

/* Results only count inside the run's window: after the deadline a
 * response or an error belongs to nobody's measurement. */
static inline int counting(const struct worker *w, uint64_t now)
{
    return !w->lg->deadline_ns || now < w->lg->deadline_ns;
}

static int set_events(struct worker *w, struct conn *c, uint32_t mask)
{
    if (c->events == mask)
        return 0;
    struct epoll_event ev = { .events = mask, .data.ptr = c };
    if (epoll_ctl(w->ep, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
        return -1;
    c->events = mask;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    c->events = 0;
}

static void push_ready(struct worker *w, struct conn *c)
{
    if (c->queued)
        return;
    c->queued = 1;
    c->next_ready = w->ready;
    w->ready = c;
}

static void conn_fail(struct worker *w, struct conn *c, int kind, uint64_t now)
{
    if (counting(w, now))
        w->errors[kind]++;
    conn_close(c);
    if (kind == ORIBI_LG_E_CONNECT) {
        c->state = C_BACKOFF;
        c->wake = now + BACKOFF_NS;
    } else {
        c->state = C_IDLE;
        push_ready(w, c);
    }
}

/* 0 connected, 1 in progress, -1 failed. */
static int conn_connect(struct worker *w, struct conn *c)
{
    const struct oribi_lg *lg = w->lg;
    int fd = socket(lg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (lg->addr.ss_family != AF_UNIX) {
        /* The request goes out in one write and must not wait for an ACK. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    c->fd = fd;
    if (connect(fd, (const struct sockaddr *)&lg->addr, lg->addrlen) == 0)
        return 0;
    if (errno == EINPROGRESS)
        return 1;
    /* Includes EAGAIN: a unix socket whose listen backlog is full. */
    conn_close(c);
    return -1;
}

static void conn_send(struct worker *w, struct conn *c, uint64_t now)
{
    const struct oribi_lg *lg = w->lg;
    while (c->woff < lg->request_len) {
        ssize_t n = send(c->fd, lg->request + c->woff, lg->request_len - c->woff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->woff += (size_t)n;
            if (counting(w, now))
                w->bytes_out += (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            conn_fail(w, c, ORIBI_LG_E_WRITE, now);
            return;
        }
    }
    uint32_t mask = EPOLLIN | (c->woff < lg->request_len ? EPOLLOUT : 0);
    if (set_events(w, c, mask) < 0)
        conn_fail(w, c, ORIBI_LG_E_WRITE, now);
}

static void conn_start(struct worker *w, struct conn *c, uint64_t now)
{
    if (!claim(w, now)) {
        conn_close(c);
        c->state = C_DONE;
        w->live--;
        return;
    }
    c->start = now;
    c->body = B_HEAD;
    c->head_len = 0;
    c->close_after = 0;
    c->woff = 0;
    if (c->fd < 0) {
        int r = conn_connect(w, c);
        if (r < 0) {
            conn_fail(w, c, ORIBI_LG_E_CONNECT, now);
            return;
        }
        if (r > 0) {
            c->state = C_CONNECTING;
            if (set_events(w, c, EPOLLOUT) < 0)
                conn_fail(w, c, ORIBI_LG_E_CONNECT, now);
            return;
        }
    }
    c->state = C_ACTIVE;
    conn_send(w, c, now);
}

/* Keeps the unparsed bytes p[0..n) of a head, p possibly inside c->head. */
static int head_keep(struct conn *c, const char *p, size_t n)
{
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

static int head_append(struct conn *c, const char *p, size_t n)
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
static enum feed_result feed(struct worker *w, struct conn *c, const char *p, size_t n)
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
            struct oribi_lg_response r;
            int h = oribi_lg_parse_response(p, n, &r);
            if (h == ORIBI_LG_INCOMPLETE) {
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
            c->close_after = (uint8_t)r.close;
            if (w->lg->is_head || r.status == 204 || r.status == 304) {
                c->body = B_NONE;
            } else if (r.chunked) {
                memset(&c->chunked, 0, sizeof(c->chunked));
                c->body = B_CHUNKED;
            } else if (r.content_length >= 0) {
                c->left = (uint64_t)r.content_length;
                c->body = c->left ? B_LENGTH : B_NONE;
            } else {
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
            ssize_t k = oribi_lg_skip_chunked(&c->chunked, p, n);
            if (k == ORIBI_LG_INCOMPLETE)
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
        default: /* B_NONE */
            /* One request in flight: bytes past its response are a server
             * bug, and would be misread as the next response. */
            return n ? FEED_ERROR : FEED_DONE;
        }
    }
}

static void conn_complete(struct worker *w, struct conn *c)
{
    const struct oribi_lg *lg = w->lg;
    uint64_t now = now_ns();
    if (counting(w, now)) {
        oribi_hist_record(w->hist, (now - c->start + 500) / 1000);
        w->requests++;
        w->status[c->status]++;
    }
    /* A response that came before the whole request was sent leaves the
     * socket mid-request: it cannot be reused either. */
    if (!lg->keepalive || c->close_after || c->woff < lg->request_len)
        conn_close(c);
    c->state = C_IDLE;
    conn_start(w, c, now);
}

static void conn_readable(struct worker *w, struct conn *c, uint64_t now)
{
    ssize_t n = recv(c->fd, w->rbuf, RBUF_SIZE, 0);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            conn_fail(w, c, ORIBI_LG_E_READ, now);
        return;
    }
    if (n == 0) {
        if (c->body == B_CLOSE) {
            c->close_after = 1;
            conn_complete(w, c);
        } else {
            /* Includes a kept-alive socket the server closed without saying
             * so: the request was lost and is counted, not silently resent. */
            conn_fail(w, c, ORIBI_LG_E_READ, now);
        }
        return;
    }
    if (counting(w, now))
        w->bytes_in += (uint64_t)n;
    switch (feed(w, c, w->rbuf, (size_t)n)) {
    case FEED_MORE:
        break;
    case FEED_DONE:
        conn_complete(w, c);
        break;
    case FEED_ERROR:
        conn_fail(w, c, ORIBI_LG_E_PARSE, now);
        break;
    }
}

static void conn_event(struct worker *w, struct conn *c, uint32_t events, uint64_t now)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
            conn_fail(w, c, ORIBI_LG_E_CONNECT, now);
            return;
        }
        c->state = C_ACTIVE;
        conn_send(w, c, now);
        return;
    }
    if (c->state != C_ACTIVE)
        return;
    if ((events & EPOLLOUT) && c->woff < w->lg->request_len) {
        conn_send(w, c, now);
        if (c->state != C_ACTIVE)
            return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        conn_readable(w, c, now);
}

static void sweep(struct worker *w, uint64_t now)
{
    for (unsigned i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if ((c->state == C_CONNECTING || c->state == C_ACTIVE) &&
            now - c->start >= w->lg->timeout_ns) {
            conn_fail(w, c, ORIBI_LG_E_TIMEOUT, now);
        } else if (c->state == C_BACKOFF && now >= c->wake) {
            c->state = C_IDLE;
            push_ready(w, c);
        }
    }
}

static void run_ready(struct worker *w)
{
    while (w->ready) {
        struct conn *c = w->ready;
        w->ready = c->next_ready;
        c->queued = 0;
        if (c->state == C_IDLE)
            conn_start(w, c, now_ns()); /* fresh clock: this may loop a while */
    }
}

static int ms_until(uint64_t now, uint64_t t)
{
    return t <= now ? 0 : (int)((t - now + 999999) / 1000000);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct oribi_lg *lg = w->lg;
    struct epoll_event ev[MAX_EVENTS];

    for (unsigned i = 0; i < w->nconns; i++)
        push_ready(w, &w->conns[i]);
    uint64_t now = now_ns(), next_sweep = now + SWEEP_NS;
    for (;;) {
        run_ready(w);
        now = now_ns();
        if (atomic_load_explicit(&lg->stop, memory_order_relaxed) || w->live == 0 ||
            (lg->deadline_ns && now >= lg->deadline_ns))
            break;
        if (now >= next_sweep) {
            sweep(w, now);
            next_sweep = now + SWEEP_NS;
            continue;
        }
        int wait = ms_until(now, next_sweep);
        if (lg->deadline_ns && ms_until(now, lg->deadline_ns) < wait)
            wait = ms_until(now, lg->deadline_ns);
        int k = epoll_wait(w->ep, ev, MAX_EVENTS, wait);
        now = now_ns();
        for (int i = 0; i < k; i++)
            if (ev[i].data.ptr != NULL) /* NULL: the stop eventfd */
                conn_event(w, ev[i].data.ptr, ev[i].events, now);
    }
    w->end_ns = now;
    for (unsigned i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    return NULL;
}

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

struct oribi_lg *oribi_lg_new(const struct oribi_lg_config *cfg, char *err, size_t errlen)
{
    if (cfg->request == NULL || cfg->request_len == 0 || cfg->connections == 0 ||
        cfg->threads == 0 || !(cfg->timeout > 0) ||
        (!(cfg->duration > 0) && cfg->requests == 0) ||
        (cfg->unix_path == NULL && (cfg->host == NULL || cfg->port == NULL))) {
        snprintf(err, errlen, "invalid load generator configuration");
        return NULL;
    }
    struct oribi_lg *lg = calloc(1, sizeof(*lg));
    if (lg == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    lg->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    lg->request = malloc(cfg->request_len);
    if (cfg->unix_path) {
        lg->unix_path = dupstr(cfg->unix_path);
    } else {
        lg->host = dupstr(cfg->host);
        lg->port = dupstr(cfg->port);
    }
    if (lg->stopfd < 0 || lg->request == NULL ||
        (cfg->unix_path ? lg->unix_path == NULL : (lg->host == NULL || lg->port == NULL))) {
        snprintf(err, errlen, "cannot allocate the run: %s", strerror(errno));
        oribi_lg_free(lg);
        return NULL;
    }
    memcpy(lg->request, cfg->request, cfg->request_len);
    lg->request_len = cfg->request_len;
    lg->is_head = cfg->request_len >= 5 && memcmp(cfg->request, "HEAD ", 5) == 0;
    lg->connections = cfg->connections;
    lg->threads = cfg->threads < cfg->connections ? cfg->threads : cfg->connections;
    lg->requests = cfg->requests;
    lg->duration_ns = cfg->duration > 0 ? (uint64_t)(cfg->duration * 1e9) : 0;
    lg->timeout_ns = (uint64_t)(cfg->timeout * 1e9);
    if (lg->timeout_ns == 0)
        lg->timeout_ns = 1;
    lg->keepalive = cfg->keepalive;
    return lg;
}

void oribi_lg_stop(struct oribi_lg *lg)
{
    uint64_t one = 1;
    atomic_store(&lg->stop, 1);
    /* Level-triggered in every worker's epoll set and never read: one
     * write wakes all of them, now and in any later epoll_wait. */
    ssize_t r = write(lg->stopfd, &one, sizeof(one));
    (void)r; /* EAGAIN only if already written ~2^64 times */
}

void oribi_lg_free(struct oribi_lg *lg)
{
    if (lg == NULL)
        return;
    if (lg->stopfd >= 0)
        close(lg->stopfd);
    free(lg->host);
    free(lg->port);
    free(lg->unix_path);
    free(lg->request);
    free(lg);
}

/* Connects and closes at once: whether this address answers at all. */
static int probe(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS) {
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        int err = 0;
        socklen_t len = sizeof(err);
        ok = poll(&pfd, 1, PROBE_MS) == 1 &&
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    close(fd);
    return ok;
}

static int resolve(struct oribi_lg *lg, char *err, size_t errlen)
{
    if (lg->unix_path) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&lg->addr;
        size_t n = strlen(lg->unix_path);
        if (n == 0 || n >= sizeof(sun->sun_path)) {
            snprintf(err, errlen, "unix socket path empty or longer than %zu bytes",
                     sizeof(sun->sun_path) - 1);
            return -1;
        }
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, lg->unix_path, n + 1);
        lg->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
        return 0;
    }
    /* "[::1]" is how IPv6 literals are written next to a port. */
    char *host = lg->host;
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        host++;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, lg->port, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "cannot resolve %s port %s: %s", host, lg->port,
                 rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    /* A name may give ::1 and 127.0.0.1 while the server listens on one:
     * take the first that accepts, else the first (its errors will count). */
    const struct addrinfo *pick = res;
    if (res->ai_next)
        for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
            if (probe(ai)) {
                pick = ai;
                break;
            }
    memcpy(&lg->addr, pick->ai_addr, pick->ai_addrlen);
    lg->addrlen = pick->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static void merge(struct oribi_lg_result *res, const struct worker *w)
{
    res->requests += w->requests;
    for (int k = 0; k < ORIBI_LG_E_COUNT; k++)
        res->errors[k] += w->errors[k];
    for (int s = 0; s < 600; s++)
        res->status[s] += w->status[s];
    res->bytes_in += w->bytes_in;
    res->bytes_out += w->bytes_out;
    oribi_hist_merge(&res->latency, w->hist);
}

static void workers_free(struct worker *ws, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct worker *w = &ws[i];
        if (w->ep >= 0)
            close(w->ep);
        if (w->conns)
            for (unsigned j = 0; j < w->nconns; j++)
                free(w->conns[j].head);
        free(w->conns);
        free(w->rbuf);
        free(w->hist);
    }
    free(ws);
}

static int worker_init(struct oribi_lg *lg, struct worker *w, unsigned nconns)
{
    w->lg = lg;
    w->nconns = w->live = nconns;
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->conns = calloc(nconns, sizeof(*w->conns));
    w->rbuf = malloc(RBUF_SIZE);
    w->hist = malloc(sizeof(*w->hist));
    if (w->ep < 0 || !w->conns || !w->rbuf || !w->hist)
        return -1;
    oribi_hist_init(w->hist);
    for (unsigned j = 0; j < nconns; j++)
        w->conns[j].fd = -1;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    return epoll_ctl(w->ep, EPOLL_CTL_ADD, lg->stopfd, &ev);
}

int oribi_lg_run(struct oribi_lg *lg, struct oribi_lg_result *res, char *err, size_t errlen)
{
    memset(res, 0, offsetof(struct oribi_lg_result, latency));
    oribi_hist_init(&res->latency);
    if (resolve(lg, err, errlen) < 0)
        return -1;

    unsigned nt = lg->threads;
    struct worker *ws = calloc(nt, sizeof(*ws));
    if (ws == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < nt; i++)
        ws[i].ep = -1;
    for (unsigned i = 0; i < nt; i++) {
        unsigned share = lg->connections / nt + (i < lg->connections % nt);
        if (worker_init(lg, &ws[i], share) < 0) {
            snprintf(err, errlen, "cannot set up thread %u: %s", i, strerror(errno));
            workers_free(ws, nt);
            return -1;
        }
    }

    /* Signals stay with the Ruby threads: ours block them all, so Ctrl-C
     * reaches Ruby, which calls oribi_lg_stop(). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    lg->start_ns = now_ns();
    lg->deadline_ns = lg->duration_ns ? lg->start_ns + lg->duration_ns : 0;
    unsigned started = 0;
    int rc = 0;
    for (; started < nt; started++) {
        rc = pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]);
        if (rc != 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < nt) {
        oribi_lg_stop(lg);
        snprintf(err, errlen, "cannot start thread: %s", strerror(rc));
    }

    uint64_t end = lg->start_ns;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
        merge(res, &ws[i]);
        if (ws[i].end_ns > end)
            end = ws[i].end_ns;
    }
    if (lg->deadline_ns && end > lg->deadline_ns)
        end = lg->deadline_ns; /* nothing after it was counted */
    res->elapsed = (double)(end - lg->start_ns) / 1e9;
    workers_free(ws, nt);
    return started < nt ? -1 : 0;
}
