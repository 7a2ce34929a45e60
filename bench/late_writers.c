/*
 * The client for bench/late_writers.rb and bench/gate.rb: a new connection per
 * request, whose request is written (a) as soon as connect returns, (b) once
 * the new socket polls writable (wrk's way: a non-blocking connect, then the
 * write when epoll says so), or (c) a millisecond after connect returns. A
 * server that accepts before the bytes come (a unix socket, TCP without
 * TCP_DEFER_ACCEPT, every TCP listener on macOS and the BSDs) sees (b) and
 * (c) as connections that are empty at first. Closed loop: each of -c
 * threads connects, writes, reads one response (Connection: close) and
 * closes, for -d seconds; latency from before connect to the response's
 * last byte.
 *
 * -m keepalive instead: each thread keeps its connection and sends -P
 * requests at a time (1; 16 is TechEmpower's plaintext test), the next
 * batch once all are answered; latency from the batch's write to each
 * response. A connection the server closes between responses (its
 * keepalive_requests) is opened again; requests it left unanswered are not
 * counted.
 *
 * -b N instead: a burst of N keep-alive clients that connect at once and
 * send requests for -d seconds (each the next when the last is answered),
 * and the workers that answered are counted (the app names its pid last in
 * the body: bench/apps/sleepy.ru).
 *
 *   cc -O2 -Wall -Wextra -pthread -o late_writers late_writers.c
 *   ./late_writers (-u PATH | -p PORT) [-m now|writable|1ms|keepalive] [-P DEPTH] [-c CONNS] [-d SECONDS] [-t TARGET]
 *   ./late_writers (-u PATH | -p PORT) [-m ...] -b N [-d SECONDS] [-t TARGET]
 *
 * Prints one line of key=value: requests, errors, rate (req/s), p50, p90,
 * p99, max (µs); with -b also pids=COUNT,COUNT,...: connections per worker,
 * most first.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum mode { M_NOW, M_WRITABLE, M_1MS, M_KEEPALIVE };

#define MAX_DEPTH 64

static struct sockaddr_storage addr;
static socklen_t addrlen;
static enum mode mode = M_NOW;
static char request[512 * MAX_DEPTH]; /* -P copies of one */
static size_t request_len;
static int depth = 1;
static int64_t deadline_ns;

struct worker {
    pthread_t tid;
    int64_t *lat; /* µs */
    size_t n, cap;
    uint64_t errors;
    /* burst */
    int fd;
    long pid;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A connected socket, its request not written yet; -1 on failure. */
static int open_conn(void)
{
    int tcp = addr.ss_family != AF_UNIX;
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (mode == M_WRITABLE ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    if (tcp) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (connect(fd, (struct sockaddr *)&addr, addrlen) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (mode == M_WRITABLE) {
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof(err);
        if (poll(&p, 1, 10000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
            close(fd);
            return -1;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    } else if (mode == M_1MS) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timeval tv = {10, 0}; /* a lost response is an error, not a hang */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* A connection and what it has read past the last response. */
struct conn {
    int fd;
    int closing; /* the last response said Connection: close */
    size_t len;
    char buf[8192];
};

/* Reads one response, leaving the bytes after it in c->buf: 0 (a 200), -1
 * (an error, another status, or cut short), 1 (closed before its first
 * byte: a kept-alive connection the server ended). With body, the
 * response's body (NUL-terminated, cut to fit). */
static int read_response(struct conn *c, char *body, size_t body_cap)
{
    long want = -1; /* bytes of the whole response, once the head is in */
    for (;;) {
        c->buf[c->len] = 0;
        char *end = strstr(c->buf, "\r\n\r\n");
        if (want < 0 && end) {
            char *cl = strcasestr(c->buf, "\r\ncontent-length:");
            if (cl && cl < end)
                want = (end + 4 - c->buf) + strtol(cl + 17, NULL, 10);
        }
        if (want >= 0 && (long)c->len >= want)
            break;
        if (c->len == sizeof(c->buf) - 1)
            return -1;
        ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (r == 0 && want < 0 && end) { /* no Content-Length: the close ends it (Unicorn) */
            want = (long)c->len;
            break;
        }
        if (r == 0 && c->len == 0)
            return 1;
        if (r <= 0)
            return -1;
        c->len += (size_t)r;
    }
    int ok = strncmp(c->buf, "HTTP/1.1 200", 12) == 0;
    char *conn = strcasestr(c->buf, "\r\nconnection: close");
    c->closing = conn && conn < strstr(c->buf, "\r\n\r\n");
    if (body) {
        char *b = strstr(c->buf, "\r\n\r\n") + 4;
        snprintf(body, body_cap, "%.*s", (int)(want - (b - c->buf)), b);
    }
    memmove(c->buf, c->buf + want, c->len - (size_t)want);
    c->len -= (size_t)want;
    return ok ? 0 : -1;
}

/* Writes the request (-P copies of it kept alive) and reads one response. */
static int exchange(struct conn *c, char *body, size_t body_cap)
{
    if (send(c->fd, request, request_len, MSG_NOSIGNAL) != (ssize_t)request_len)
        return -1;
    return read_response(c, body, body_cap);
}

static void record(struct worker *w, int64_t us)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 4096;
        w->lat = realloc(w->lat, w->cap * sizeof(*w->lat));
        if (!w->lat) {
            perror("realloc");
            exit(1);
        }
    }
    w->lat[w->n++] = us;
}

static void *closed_loop(void *p)
{
    struct worker *w = p;
    struct conn c;
    while (now_ns() < deadline_ns) {
        int64_t t = now_ns();
        c.fd = open_conn();
        c.len = 0;
        int ok = c.fd >= 0 && exchange(&c, NULL, 0) == 0;
        if (c.fd >= 0)
            close(c.fd);
        if (ok)
            record(w, (now_ns() - t) / 1000);
        else
            w->errors++;
    }
    return NULL;
}

static void *kept_alive(void *p)
{
    struct worker *w = p;
    struct conn *c = malloc(sizeof(*c));
    if (!c) {
        perror("malloc");
        exit(1);
    }
    c->fd = -1;
    c->closing = 0;
    int served = 0; /* responses on this connection */
    while (now_ns() < deadline_ns) {
        if (c->fd < 0) {
            c->fd = open_conn();
            c->len = 0;
            c->closing = 0;
            served = 0;
            if (c->fd < 0) {
                w->errors++;
                continue;
            }
        }
        int64_t t = now_ns();
        int r = send(c->fd, request, request_len, MSG_NOSIGNAL) == (ssize_t)request_len ? 0 : -1;
        for (int i = 0; i < depth && r == 0 && !c->closing; i++, served++) {
            r = read_response(c, NULL, 0);
            if (r == 0)
                record(w, (now_ns() - t) / 1000);
        }
        if (r || c->closing) {
            if (r < 0 || !served)
                w->errors++;
            close(c->fd);
            c->fd = -1;
        }
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return NULL;
}

static pthread_barrier_t burst_start;

static void *burst_one(void *p)
{
    struct worker *w = p;
    char body[256];
    pthread_barrier_wait(&burst_start);
    struct conn c;
    w->fd = c.fd = open_conn();
    c.len = 0;
    if (w->fd < 0)
        goto fail;
    do {
        int64_t t = now_ns();
        if (exchange(&c, body, sizeof(body)) != 0) {
            if (w->n) /* closed after its keepalive_requests: its worker is known */
                break;
            goto fail;
        }
        record(w, (now_ns() - t) / 1000);
        if (!w->pid) {
            char *last = strrchr(body, ' ');
            w->pid = last ? strtol(last + 1, NULL, 10) : 0;
        }
    } while (now_ns() < deadline_ns);
    return NULL;
fail:
    w->errors++;
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmplong_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

static int64_t pct(const int64_t *v, size_t n, double p)
{
    if (!n)
        return -1;
    size_t i = (size_t)(p / 100.0 * (double)n);
    return v[i < n ? i : n - 1];
}

static void usage(void)
{
    fprintf(stderr, "usage: late_writers (-u PATH | -p PORT) [-m now|writable|1ms|keepalive] [-P DEPTH] [-c CONNS] "
                    "[-d SECONDS] [-b BURST] [-t TARGET]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int conns = 1, burst = 0, opt;
    double secs = 5;
    const char *target = "/";
    while ((opt = getopt(argc, argv, "u:p:m:P:c:d:b:t:")) != -1) {
        switch (opt) {
        case 'u': {
            struct sockaddr_un *un = (struct sockaddr_un *)&addr;
            un->sun_family = AF_UNIX;
            if (strlen(optarg) >= sizeof(un->sun_path))
                usage();
            strcpy(un->sun_path, optarg);
            addrlen = sizeof(*un);
            break;
        }
        case 'p': {
            struct sockaddr_in *in = (struct sockaddr_in *)&addr;
            in->sin_family = AF_INET;
            in->sin_port = htons((uint16_t)atoi(optarg));
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            addrlen = sizeof(*in);
            break;
        }
        case 'm':
            if (!strcmp(optarg, "now"))
                mode = M_NOW;
            else if (!strcmp(optarg, "writable"))
                mode = M_WRITABLE;
            else if (!strcmp(optarg, "1ms"))
                mode = M_1MS;
            else if (!strcmp(optarg, "keepalive"))
                mode = M_KEEPALIVE;
            else
                usage();
            break;
        case 'P':
            depth = atoi(optarg);
            break;
        case 'c':
            conns = atoi(optarg);
            break;
        case 'd':
            secs = atof(optarg);
            break;
        case 'b':
            burst = atoi(optarg);
            break;
        case 't':
            target = optarg;
            break;
        default:
            usage();
        }
    }
    if (!addrlen || conns < 1 || (burst < 0) || strlen(target) > 256 || depth < 1 || depth > MAX_DEPTH ||
        (depth > 1 && mode != M_KEEPALIVE))
        usage();
    int keepalive = burst || mode == M_KEEPALIVE;
    request_len = (size_t)snprintf(request, 512, "GET %s HTTP/1.1\r\nHost: bench\r\n%s\r\n", target,
                                   keepalive ? "" : "Connection: close\r\n");
    for (int i = 1; i < depth; i++)
        memcpy(request + i * request_len, request, request_len);
    request_len *= (size_t)depth;
    int n = burst ? burst : conns;
    struct worker *w = calloc((size_t)n, sizeof(*w));
    if (!w)
        return 1;
    for (int i = 0; i < n; i++)
        w[i].fd = -1;
    int64_t start = now_ns();
    deadline_ns = start + (int64_t)(secs * 1e9);
    if (burst)
        pthread_barrier_init(&burst_start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&w[i].tid, NULL, burst ? burst_one : keepalive ? kept_alive : closed_loop, &w[i]);
    size_t total = 0;
    uint64_t errors = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].tid, NULL);
        total += w[i].n;
        errors += w[i].errors;
    }
    double elapsed = (double)(now_ns() - start) / 1e9;
    int64_t *all = malloc((total ? total : 1) * sizeof(*all));
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        if (w[i].n)
            memcpy(all + k, w[i].lat, w[i].n * sizeof(*all));
        k += w[i].n;
        if (w[i].fd >= 0)
            close(w[i].fd);
    }
    qsort(all, total, sizeof(*all), cmp64);
    printf("requests=%zu errors=%llu rate=%.1f p50=%lld p90=%lld p99=%lld max=%lld", total, (unsigned long long)errors,
           (double)total / elapsed, (long long)pct(all, total, 50), (long long)pct(all, total, 90),
           (long long)pct(all, total, 99), (long long)(total ? all[total - 1] : -1));
    if (burst) { /* connections per worker, most first */
        long pids[n], counts[n];
        int npids = 0;
        for (int i = 0; i < n; i++) {
            int j = 0;
            while (j < npids && pids[j] != w[i].pid)
                j++;
            if (!w[i].pid)
                continue;
            if (j == npids) {
                pids[npids] = w[i].pid;
                counts[npids++] = 0;
            }
            counts[j]++;
        }
        qsort(counts, (size_t)npids, sizeof(long), cmplong_desc);
        printf(" pids=");
        for (int j = 0; j < npids; j++)
            printf("%s%ld", j ? "," : "", counts[j]);
    }
    printf("\n");
    return 0;
}
