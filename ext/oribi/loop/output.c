
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/clock.h"
#include "loop/output.h"
#include "loop/transport.h"

static void budget_add(struct oribi_conn *c, size_t n)
{
    if (c->budget)
        __atomic_add_fetch(&c->budget->kept, n, __ATOMIC_RELAXED);
}

static void budget_sub(struct oribi_conn *c, size_t n)
{
    if (c->budget)
        __atomic_sub_fetch(&c->budget->kept, n, __ATOMIC_RELAXED);
}

static size_t conn_share(const struct oribi_conn *c)
{
    size_t share = c->budget ? c->budget->cap / ORIBI_CONN_BACKLOG_SHARE : 0;
    return share > ORIBI_CONN_BACKLOG_MIN ? share : ORIBI_CONN_BACKLOG_MIN;
}

int oribi_conn_flush(struct oribi_conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = oribi_io_write(c, c->wbuf + c->woff, c->wlen - c->woff);
        if (n > 0) {
            c->woff += (size_t)n;
            budget_sub(c, (size_t)n);
            c->wprogress_ms = oribi_coarse_ms();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return c->wlen - c->woff > conn_share(c) ? 1 : 0;
        } else {
            return -1;
        }
    }
    c->woff = c->wlen = 0;
    return 0;
}

static int wbuf_append(struct oribi_conn *c, const char *p, size_t n)
{
    if (c->woff && c->woff == c->wlen)
        c->woff = c->wlen = 0;
    if (c->wcap - c->wlen < n) {
        if (c->woff) { /* reclaim the flushed front first */
            memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
            c->wlen -= c->woff;
            c->woff = 0;
        }
        if (c->wcap - c->wlen < n) {
            size_t cap = c->wcap ? c->wcap : 16384;
            while (cap - c->wlen < n)
                cap *= 2;
            char *w = realloc(c->wbuf, cap);
            if (!w)
                return -1;
            c->wbuf = w;
            c->wcap = cap;
        }
    }
    if (c->wlen == c->woff)
        c->wprogress_ms = oribi_coarse_ms(); /* a stall is counted from here */
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
    budget_add(c, n);
    return 0;
}

static int conn_write(struct oribi_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    size_t skip = 0;
    if (c->wlen == c->woff) {
        /* The common case: the socket takes everything in one write. */
        ssize_t n;
        do {
            n = oribi_io_writev(c, iov, iovcnt > 1024 ? 1024 : iovcnt, flags);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno != EAGAIN)
                return -1;
            n = 0;
        }
        skip = (size_t)n;
    }
    for (int i = 0; i < iovcnt; i++) {
        size_t len = iov[i].iov_len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        if (wbuf_append(c, (const char *)iov[i].iov_base + skip, len - skip) < 0)
            return -1;
        skip = 0;
    }
    if (c->wlen > c->woff)
        return oribi_conn_flush(c);
    return 0;
}

int oribi_conn_wait_writable(struct oribi_conn *c, int64_t timeout_ms)
{
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    int r;
    do {
        r = poll(&p, 1, (int)timeout_ms);
    } while (r < 0 && errno == EINTR);
    return r == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

int oribi_conn_write(struct oribi_conn *c, const struct iovec *iov, int iovcnt)
{
    return conn_write(c, iov, iovcnt, 0);
}

int oribi_conn_write_last(struct oribi_conn *c, const struct iovec *iov, int iovcnt)
{
    if (c->cork && c->file_fd < 0) {
        size_t n = c->wlen - c->woff;
        for (int i = 0; i < iovcnt; i++)
            n += iov[i].iov_len;
        if (n <= ORIBI_CORK_MAX) {
            for (int i = 0; i < iovcnt; i++)
                if (iov[i].iov_len && wbuf_append(c, iov[i].iov_base, iov[i].iov_len) < 0)
                    return -1;
            return 0;
        }
    }
    return conn_write(c, iov, iovcnt, 0);
}

int oribi_conn_write_more(struct oribi_conn *c, const struct iovec *iov, int iovcnt)
{
    return conn_write(c, iov, iovcnt, ORIBI_MSG_MORE);
}

int oribi_conn_sendfile(struct oribi_conn *c, int fd, int64_t *off, int64_t end)
{
    while (*off < end) {
        int64_t left = end - *off;
        size_t want = left > (1 << 30) ? (size_t)1 << 30 : (size_t)left;
        ssize_t n = oribi_io_sendfile(c, fd, off, want);
        if (n > 0) {
            c->wprogress_ms = oribi_coarse_ms();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return 1;
        } else {
            return -1; /* gone, or the file ended before end */
        }
    }
    return 0;
}

int oribi_spool_budget_take(struct oribi_conn *c, size_t n)
{
    if (!c->budget)
        return 1;
    size_t now = __atomic_add_fetch(&c->budget->spooled, n, __ATOMIC_RELAXED);
    if (c->budget->spool_cap && now > c->budget->spool_cap) {
        __atomic_sub_fetch(&c->budget->spooled, n, __ATOMIC_RELAXED);
        return 0;
    }
    return 1;
}

void oribi_spool_budget_give(struct oribi_conn *c, int64_t n)
{
    if (c->budget && n > 0)
        __atomic_sub_fetch(&c->budget->spooled, (size_t)n, __ATOMIC_RELAXED);
}

static void close_file(struct oribi_conn *c)
{
    if (c->file_fd >= 0) {
        if (c->file_spooled)
            oribi_spool_budget_give(c, c->file_end - c->file_off);
        close(c->file_fd);
    }
    c->file_fd = -1;
    c->file_spooled = 0;
}

static int send_file(struct oribi_conn *c)
{
    int64_t from = c->file_off;
    int r = oribi_conn_sendfile(c, c->file_fd, &c->file_off, c->file_end);
    if (c->file_spooled)
        oribi_spool_budget_give(c, c->file_off - from);
    if (r == 0)
        close_file(c);
    return r;
}

int oribi_conn_send_pending(struct oribi_conn *c)
{
    int r = oribi_conn_flush(c);
    if (r < 0)
        return -1;
    if (c->wlen > c->woff)
        return 1;
    return c->file_fd >= 0 ? send_file(c) : 0;
}

void oribi_conn_hand_file(struct oribi_conn *c, int file_fd, int64_t off, int64_t left, int spooled)
{
    c->file_fd = file_fd;
    c->file_off = off;
    c->file_end = off + left;
    c->file_spooled = spooled;
    c->wprogress_ms = oribi_coarse_ms();
}

void oribi_conn_discard_output(struct oribi_conn *c)
{
    budget_sub(c, c->wlen - c->woff);
    c->wlen = c->woff = 0;
    close_file(c);
}
