/*
 * The event-stream clients of bench/streams.rb: N connections to PORT on
 * loopback, each asking for PATH and reading an event stream whose events
 * are "data: DUE\n\n", DUE the wall-clock time (seconds) the event was due.
 * One thread, epoll, so that ten thousand streams cost the client little
 * and the lateness measured is the server's.
 *
 * Protocol on stdin/stdout: once every request is sent it prints "open";
 * it then reads "T0 T1" (CLOCK_MONOTONIC seconds), counts the events that
 * arrive in [T0, T1), and at T1 prints "fed K" (streams that got at least
 * EVENTS in the window) and one line per event in the window: its lateness
 * in microseconds (arrival less due).
 *
 *   cc -O2 -o sse_client bench/sse_client.c && ./sse_client PORT N PATH EVENTS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct stream {
    int fd, len, events;
    char buf[4096];
};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s PORT N PATH EVENTS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]), want = atoi(argv[4]);
    char req[512];
    int reqlen = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", argv[3]);
    int ep = epoll_create1(0);
    struct stream *ss = calloc((size_t)n, sizeof(*ss));
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((unsigned short)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(fd, req, (size_t)reqlen) != reqlen) {
            perror("sse_client: connect");
            return 1;
        }
        ss[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &ss[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    printf("open\n");
    fflush(stdout);
    double t0, t1;
    if (scanf("%lf %lf", &t0, &t1) != 2)
        return 1;
    size_t cap = 1 << 20, nlate = 0;
    long *late = malloc(cap * sizeof(*late));
    struct epoll_event evs[512];
    for (;;) {
        double now = clock_s(CLOCK_MONOTONIC);
        if (now >= t1)
            break;
        int k = epoll_wait(ep, evs, 512, (int)((t1 - now) * 1000) + 1);
        double wall = clock_s(CLOCK_REALTIME), mono = clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < k; i++) {
            struct stream *s = evs[i].data.ptr;
            ssize_t r = read(s->fd, s->buf + s->len, sizeof(s->buf) - 1 - (size_t)s->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
                continue;
            }
            s->len += (int)r;
            s->buf[s->len] = 0;
            char *p = s->buf, *e;
            while ((p = strstr(p, "data: ")) && (e = strstr(p, "\n\n"))) {
                double due = strtod(p + 6, NULL);
                if (mono >= t0) {
                    s->events++;
                    if (nlate == cap)
                        late = realloc(late, (cap *= 2) * sizeof(*late));
                    late[nlate++] = (long)((wall - due) * 1e6);
                }
                p = e + 2;
            }
            /* keep what follows the last whole event (the head, a partial one) */
            char *rest = p ? p : s->buf + s->len;
            if (!p) { /* no "data: " left: keep at most a partial marker's worth */
                int keep = s->len < 8 ? s->len : 8;
                rest = s->buf + s->len - keep;
            }
            s->len = (int)(s->buf + s->len - rest);
            memmove(s->buf, rest, (size_t)s->len);
        }
    }
    int fed = 0;
    for (int i = 0; i < n; i++)
        fed += ss[i].events >= want;
    printf("fed %d\n", fed);
    for (size_t i = 0; i < nlate; i++)
        printf("%ld\n", late[i]);
    return 0;
}
