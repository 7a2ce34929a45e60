#include <errno.h>
#include <unistd.h>

#include "loop/output.h"
#include "loop/spool.h"
#include "loop/tmpfile.h"

int oribi_spool_append(struct oribi_spool *s, struct oribi_conn *c, const char *dir, const struct iovec *iov,
                       int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (!oribi_spool_budget_take(c, total))
        return 1;
    s->conn = c;
    if (s->fd < 0 && (s->fd = oribi_tmpfile(dir)) < 0) {
        oribi_spool_budget_give(c, (int64_t)total);
        return -1;
    }
    /* pwrite at len: a failed append leaves bytes past len, never sent */
    int64_t at = s->len;
    for (int i = 0; i < iovcnt; i++) {
        const char *p = iov[i].iov_base;
        size_t n = iov[i].iov_len;
        while (n) {
            ssize_t w = pwrite(s->fd, p, n, (off_t)at);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                oribi_spool_budget_give(c, (int64_t)total);
                return -1;
            }
            p += w;
            n -= (size_t)w;
            at += w;
        }
    }
    s->len = at;
    return 0;
}

int oribi_spool_send(struct oribi_spool *s, struct oribi_conn *c)
{
    if (oribi_conn_flush(c) < 0)
        return -1;
    if (c->wlen > c->woff)
        return 1;
    if (s->sent < s->len) {
        int64_t from = s->sent;
        int r = oribi_conn_sendfile(c, s->fd, &s->sent, s->len);
        oribi_spool_budget_give(c, s->sent - from);
        if (r != 0)
            return r;
    }
    /* Caught up: the next bytes start the file again, so that it never
     * holds more than the spool limit. */
    if (s->len > 0 && ftruncate(s->fd, 0) < 0) {
        /* the disk is not given back; the offsets start again all the same */
    }
    s->len = s->sent = 0;
    return 0;
}

void oribi_spool_hand(struct oribi_spool *s, struct oribi_conn *c)
{
    if (s->fd >= 0 && s->sent < s->len) {
        oribi_conn_hand_file(c, s->fd, s->sent, s->len - s->sent, 1); /* the budget's count goes with it */
        s->fd = -1;
        s->len = s->sent = 0;
    }
    oribi_spool_close(s);
}

void oribi_spool_close(struct oribi_spool *s)
{
    if (s->conn)
        oribi_spool_budget_give(s->conn, s->len - s->sent);
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    s->len = s->sent = 0;
}
