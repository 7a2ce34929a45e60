/*
 * The client for bench/late_writers.rb: a new connection per request, whose
 * request is written (a) as soon as connect returns, (b) once the new
 * socket polls writable (wrk's way: a non-blocking connect, then the write
 * when epoll says so), or (c) a millisecond after connect returns. A
 * server that accepts before the bytes come (a unix socket, TCP without
 * TCP_DEFER_ACCEPT, every TCP listener on macOS and the BSDs) sees (b) and
 * (c) as connections that are empty at first. Closed loop: each of -c
 * threads connects, writes, reads one response (Connection: close) and
 * closes, for -d seconds; latency from before connect to the response's
 * last byte.
 *
 * -b N instead: a burst of N keep-alive clients that connect at once and
 * send requests for -d seconds (each the next when the last is answered),
 * and the workers that answered are counted (the app names its pid last in
 * the body: bench/apps/sleepy.ru).
 *
 *   cc -O2 -Wall -Wextra -pthread -o late_writers late_writers.c
 *   ./late_writers (-u PATH | -p PORT) [-m now|writable|1ms] [-c CONNS] [-d SECONDS] [-t TARGET]
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

enum mode { M_NOW, M_WRITABLE, M_1MS };

static struct sockaddr_storage addr;
static socklen_t addrlen;
static enum mode mode = M_NOW;
static char request[512];
static size_t request_len;
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

/* Writes the request and reads one response: 0, or -1. With body, the
 * response's body (NUL-terminated, cut to fit). */
static int exchange(int fd, char *body, size_t body_cap)
{
    if (send(fd, request, request_len, MSG_NOSIGNAL) != (ssize_t)request_len)
        return -1;
    char buf[4096];
    size_t len = 0;
    buf[0] = 0;
    long want = -1; /* bytes of the whole response, once the head is in */
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (r == 0 && want < 0 && strstr(buf, "\r\n\r\n"))
            want = (long)len; /* no Content-Length: the close ends it (Unicorn) */
        else if (r <= 0)
            return -1;
        else
            len += (size_t)r;
        buf[len] = 0;
        if (want < 0) {
            char *end = strstr(buf, "\r\n\r\n");
            char *cl = strcasestr(buf, "\r\ncontent-length:");
            if (end && cl && cl < end)
                want = (end + 4 - buf) + strtol(cl + 17, NULL, 10);
            else if (len == sizeof(buf) - 1)
                return -1;
        }
        if (want >= 0 && (long)len >= want) {
            if (body) {
                char *b = strstr(buf, "\r\n\r\n") + 4;
                snprintf(body, body_cap, "%.*s", (int)(want - (b - buf)), b);
            }
            return strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
        }
    }
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
    while (now_ns() < deadline_ns) {
        int64_t t = now_ns();
        int fd = open_conn();
        int ok = fd >= 0 && exchange(fd, NULL, 0) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            record(w, (now_ns() - t) / 1000);
        else
            w->errors++;
    }
    return NULL;
}

static pthread_barrier_t burst_start;

static void *burst_one(void *p)
{
    struct worker *w = p;
    char body[256];
    pthread_barrier_wait(&burst_start);
    w->fd = open_conn();
    if (w->fd < 0)
        goto fail;
    do {
        int64_t t = now_ns();
        if (exchange(w->fd, body, sizeof(body)) < 0) {
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
    fprintf(stderr, "usage: late_writers (-u PATH | -p PORT) [-m now|writable|1ms] [-c CONNS] [-d SECONDS] "
                    "[-b BURST] [-t TARGET]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int conns = 1, burst = 0, opt;
    double secs = 5;
    const char *target = "/";
    while ((opt = getopt(argc, argv, "u:p:m:c:d:b:t:")) != -1) {
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
            mode = !strcmp(optarg, "now") ? M_NOW : !strcmp(optarg, "writable") ? M_WRITABLE : M_1MS;
            if (mode == M_1MS && strcmp(optarg, "1ms"))
                usage();
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
    if (!addrlen || conns < 1 || (burst < 0) || strlen(target) > 256)
        usage();
    request_len = (size_t)snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: bench\r\n%s\r\n", target,
                                   burst ? "" : "Connection: close\r\n");
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
        pthread_create(&w[i].tid, NULL, burst ? burst_one : closed_loop, &w[i]);
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
