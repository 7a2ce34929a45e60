/*
 * An upstream that answers every request after the same delay, for
 * bench/fibers.rb: the service an app waits on, cheap enough that the CPU
 * it takes leaves the machine to the servers measured. One thread, epoll;
 * since every delay is the same, the answers are due in the order the
 * requests came, a FIFO. Each connection: one request (its head read to
 * the blank line), then after the delay one response, and the close.
 *
 *   cc -O2 -o upstream bench/upstream.c && ./upstream PORT DELAY_MS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 8192

struct conn {
    int fd, len;
    char head[HEAD_MAX];
};

struct due {
    int fd;
    long long at_ms;
};

static const char answer[] = "HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nupstream";

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT DELAY_MS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    long long delay = atoll(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((unsigned short)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4096) < 0) {
        perror("upstream: bind");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    size_t cap = 1 << 16, head = 0, tail = 0; /* the FIFO of answers due, a ring */
    struct due *fifo = malloc(cap * sizeof(*fifo));
    struct epoll_event evs[256];
    for (;;) {
        long long wait = -1;
        if (head != tail) {
            wait = fifo[head % cap].at_ms - now_ms();
            if (wait < 0)
                wait = 0;
        }
        int n = epoll_wait(ep, evs, 256, (int)wait);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    c = calloc(1, sizeof(*c));
                    c->fd = fd;
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            ssize_t r = read(c->fd, c->head + c->len, HEAD_MAX - 1 - (size_t)c->len);
            if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c);
                continue;
            }
            if (r > 0)
                c->len += (int)r;
            c->head[c->len] = 0;
            if (!strstr(c->head, "\r\n\r\n") && c->len < HEAD_MAX - 1)
                continue;
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            if (tail - head == cap) { /* more waiting than the ring holds: answer at once */
                write(c->fd, answer, sizeof(answer) - 1);
                close(c->fd);
            } else {
                fifo[tail++ % cap] = (struct due){c->fd, now_ms() + delay};
            }
            free(c);
        }
        for (long long t = now_ms(); head != tail && fifo[head % cap].at_ms <= t; head++) {
            int fd = fifo[head % cap].fd;
            if (write(fd, answer, sizeof(answer) - 1) < 0)
                perror("upstream: write");
            close(fd);
        }
    }
}
