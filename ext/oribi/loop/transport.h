/*
 * A connection's bytes in and out, through its transport. The loop
 * (conn.c), the response writer (output.c) and streams (ruby/stream.c)
 * move bytes with these alone, never with the socket's own calls, so that
 * a transport other than the plain socket sits behind them without their
 * knowing. Each returns as the call it stands for: a count, or -1 with
 * errno (EAGAIN: the socket must become readable or writable first).
 */
#ifndef ORIBI_TRANSPORT_H
#define ORIBI_TRANSPORT_H

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loop/conn.h"
#include "loop/tls.h"
#include "os/sendfile.h"
#include "os/socket.h"

/* Up to n bytes into buf; 0 at the peer's end. */
static inline ssize_t oribi_io_read(struct oribi_conn *c, void *buf, size_t n)
{
    if (c->tls && !c->proxy) /* a PROXY header comes before TLS, in plain */
        return oribi_tls_read(c, buf, n);
    return read(c->fd, buf, n);
}

/* Bytes from iov, as one write; flags: ORIBI_MSG_MORE when more follow at
 * once (a hint). A gone peer is EPIPE, never SIGPIPE. */
static inline ssize_t oribi_io_writev(struct oribi_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
    if (c->tls)
        return oribi_tls_writev(c, iov, iovcnt);
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt};
    return sendmsg(c->fd, &mh, ORIBI_MSG_NOSIGNAL | flags);
}

static inline ssize_t oribi_io_write(struct oribi_conn *c, const void *buf, size_t n)
{
    if (c->tls) {
        struct iovec iov = {(void *)buf, n};
        return oribi_tls_writev(c, &iov, 1);
    }
    return send(c->fd, buf, n, ORIBI_MSG_NOSIGNAL);
}

/* Up to n bytes of the file fd from *off, advancing *off by what was sent
 * (through a buffer under TLS). */
static inline ssize_t oribi_io_sendfile(struct oribi_conn *c, int fd, int64_t *off, size_t n)
{
    if (c->tls)
        return oribi_tls_sendfile(c, fd, off, n);
    return oribi_sendfile(c->fd, fd, off, n);
}

/* Ends the write side: the peer reads EOF once what was written is in. */
static inline int oribi_io_shutdown(struct oribi_conn *c)
{
    if (c->tls)
        return oribi_tls_shutdown(c);
    return shutdown(c->fd, SHUT_WR);
}

#endif
