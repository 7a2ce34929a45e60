/*
 * The ceiling for bench/suite.rb: the least an HTTP/1.1 server can do per
 * request on this machine. Prefork workers, each with its own epoll loop on
 * the shared listeners (unix socket and/or TCP), answer every request with
 * one fixed 200 response. Keep-alive aware (Connection: close and HTTP/1.0
 * close after the response), pipelining tolerated, a Content-Length body
 * read and thrown away. No routing, no app, no dates: not a product.
 *
 *   cc -O2 -Wall -Wextra -o minimal minimal.c
 *   ./minimal [-w WORKERS] [-u PATH] [-p PORT] [-s BODY_BYTES]
 *
 * TERM to the master stops it, and its workers with it (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define INBUF      16384
#define MAX_EVENTS 256

struct conn {
    int fd;
    size_t inlen;
    size_t skip;      /* body bytes of the current request still to discard */
    size_t pending;   /* bytes of the current response still to write */
    unsigned queued;  /* responses owed after the current one (pipelining) */
    int close_after;  /* close once everything owed is written */
    uint32_t watched; /* the events it is in the epoll set for, 0 = not in it */
    char in[INBUF];
};

static char *response;
static size_t response_len;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int listen_unix(const char *path)
{
    struct sockaddr_un a;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        die("socket");
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) {
        fprintf(stderr, "unix socket path too long\n");
        exit(1);
    }
    strcpy(a.sun_path, path);
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind unix");
    if (listen(fd, 1024) < 0)
        die("listen");
    return fd;
}

static int listen_tcp(int port)
{
    struct sockaddr_in a;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        die("socket");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind tcp");
    if (listen(fd, 1024) < 0)
        die("listen");
    return fd;
}

/* Case-insensitive search for a header line "name: value..." in head[0..len). */
static const char *header(const char *head, size_t len, const char *name)
{
    size_t n = strlen(name);
    const char *p = head, *end = head + len;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol)
            break;
        if ((size_t)(eol - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
            p += n + 1;
            while (p < eol && (*p == ' ' || *p == '\t'))
                p++;
            return p;
        }
        p = eol + 2;
    }
    return NULL;
}

/* close() also takes the fd out of the epoll set. */
static void drop(struct conn *c)
{
    close(c->fd);
    free(c);
}

/* Watches c for EVENTS, adding it to the set the first time. */
static int watch(int ep, struct conn *c, uint32_t events)
{
    if (c->watched == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    int r = epoll_ctl(ep, c->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev);
    c->watched = events;
    return r;
}

/* Writes what is owed; returns -1 when the connection is done or broken. */
static int flush(int ep, struct conn *c)
{
    while (c->pending > 0) {
        ssize_t w = write(c->fd, response + (response_len - c->pending), c->pending);
        if (w < 0) {
            if (errno == EAGAIN)
                return watch(ep, c, EPOLLIN | EPOLLOUT);
            return -1;
        }
        c->pending -= (size_t)w;
        if (c->pending == 0 && c->queued > 0) {
            c->queued--;
            c->pending = response_len;
        }
    }
    if (c->close_after)
        return -1;
    return watch(ep, c, EPOLLIN);
}

/* Consumes complete requests from c->in; returns -1 on a bad request. */
static int parse(struct conn *c)
{
    size_t off = 0;
    for (;;) {
        if (c->skip > 0) {
            size_t n = c->inlen - off < c->skip ? c->inlen - off : c->skip;
            off += n;
            c->skip -= n;
            if (c->skip > 0)
                break;
        }
        if (c->close_after) {
            off = c->inlen;
            break;
        } /* ignore what follows a close */
        char *head = c->in + off;
        size_t avail = c->inlen - off;
        char *end = memmem(head, avail, "\r\n\r\n", 4);
        if (!end) {
            if (avail == INBUF)
                return -1; /* head too large for this toy */
            break;
        }
        size_t hlen = (size_t)(end - head) + 4;
        const char *v = header(head, hlen, "Content-Length");
        if (v) {
            char *e;
            unsigned long long cl = strtoull(v, &e, 10);
            if (e == v)
                return -1;
            c->skip = (size_t)cl;
        }
        const char *conn = header(head, hlen, "Connection");
        const char *eol = memmem(head, hlen, "\r\n", 2);
        int http10 = eol && eol - head >= 8 && memcmp(eol - 8, "HTTP/1.0", 8) == 0;
        if ((conn && strncasecmp(conn, "close", 5) == 0) ||
            (http10 && !(conn && strncasecmp(conn, "keep-alive", 10) == 0)))
            c->close_after = 1;
        if (c->pending == 0)
            c->pending = response_len;
        else
            c->queued++;
        off += hlen;
    }
    memmove(c->in, c->in + off, c->inlen - off);
    c->inlen -= off;
    return 0;
}

/* Reads what is there and answers it; -1 when the connection is done. */
static int readable(int ep, struct conn *c)
{
    ssize_t r = read(c->fd, c->in + c->inlen, INBUF - c->inlen);
    if (r == 0 || (r < 0 && errno != EAGAIN))
        return -1;
    if (r > 0) {
        c->inlen += (size_t)r;
        if (parse(c) < 0)
            return -1;
    }
    if (c->pending > 0 || c->close_after)
        return flush(ep, c);
    return watch(ep, c, EPOLLIN);
}

/* A new connection is read at once (its request has usually arrived with
 * it), so one served per connection costs accept4, read, write and close,
 * and epoll only hears of the ones that make it wait. */
static void serve(int *lfds, int *tcp, int nl)
{
    int ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    for (int i = 0; i < nl; i++) {
        /* listeners carry small integers, connections pointers */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = (uint64_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, lfds[i], &ev) < 0)
            die("epoll_ctl");
    }
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 < (uint64_t)nl) {
                int li = (int)evs[i].data.u64;
                for (;;) {
                    int fd = accept4(lfds[li], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0)
                        break;
                    if (tcp[li]) {
                        int one = 1;
                        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    }
                    struct conn *c = calloc(1, sizeof *c);
                    if (!c) {
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    if (readable(ep, c) < 0)
                        drop(c);
                }
                continue;
            }
            struct conn *c = evs[i].data.ptr;
            int r = 0;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                r = readable(ep, c);
            else if (c->pending > 0)
                r = flush(ep, c);
            if (r < 0)
                drop(c);
        }
    }
}

int main(int argc, char **argv)
{
    int workers = 2, port = 0, opt;
    const char *path = NULL;
    long body = 14; /* "Hello, World!\n" */
    while ((opt = getopt(argc, argv, "w:u:p:s:")) != -1) {
        switch (opt) {
        case 'w':
            workers = atoi(optarg);
            break;
        case 'u':
            path = optarg;
            break;
        case 'p':
            port = atoi(optarg);
            break;
        case 's':
            body = atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: %s [-w WORKERS] [-u PATH] [-p PORT] [-s BODY_BYTES]\n", argv[0]);
            return 2;
        }
    }
    if ((!path && !port) || workers < 1 || body < 0) {
        fprintf(stderr, "need -u PATH and/or -p PORT\n");
        return 2;
    }
    char head[128];
    int hl =
        snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %ld\r\n\r\n", body);
    response_len = (size_t)hl + (size_t)body;
    response = malloc(response_len);
    if (!response)
        die("malloc");
    memcpy(response, head, (size_t)hl);
    if (body == 14)
        memcpy(response + hl, "Hello, World!\n", 14);
    else
        memset(response + hl, 'x', (size_t)body);

    int lfds[2], tcp[2], nl = 0;
    if (path) {
        tcp[nl] = 0;
        lfds[nl++] = listen_unix(path);
    }
    if (port) {
        tcp[nl] = 1;
        lfds[nl++] = listen_tcp(port);
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < workers; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* no orphans when the master is killed */
            serve(lfds, tcp, nl);
            return 0;
        }
    }
    /* The master waits; TERM (default action) ends it, and the suite signals
   * the whole process group. A worker that dies ends the master too. */
    int status;
    wait(&status);
    if (path)
        unlink(path);
    return 1;
}
