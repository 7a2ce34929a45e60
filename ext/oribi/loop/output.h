/*
 * Writing to a client connection: what the socket does not take at once is
 * kept in the conn's write buffer (counted in the worker's write budget),
 * flushed by the loop or by a caller that waits. A file body is handed to
 * the conn and sent with sendfile(2) by the loop. Nothing here takes the
 * GVL, and nothing blocks but oribi_conn_wait_writable.
 */
#ifndef ORIBI_OUTPUT_H
#define ORIBI_OUTPUT_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop/conn.h"

/* What one conn may keep before its writer waits: an eighth of the
 * worker's max_write_backlog, so that one client cannot take it all, and
 * at least 1 MiB. */
#define ORIBI_CONN_BACKLOG_MIN   (1024 * 1024)
#define ORIBI_CONN_BACKLOG_SHARE 8

/* Writes iov; bytes the socket does not take now are kept and flushed by
 * the loop. Returns 0, 1 when the conn keeps more than its share (wait
 * with oribi_conn_wait_writable, then oribi_conn_flush), or -1 when the
 * peer is gone. Never blocks. */
int oribi_conn_write(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
/* The same with MSG_MORE: more bytes follow at once (a head before a
 * sendfile), so the kernel may put them in one segment. */
int oribi_conn_write_more(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
/* The last bytes of a whole response. When its client has sent the next
 * request already (c->cork: pipelining) and what is kept stays under
 * ORIBI_CORK_MAX, they are only kept, to leave in one sendmsg with the next
 * responses' (the loop sends them when the pipeline runs out, before it
 * waits, and when it looks at its other conns: flush_corked); else as
 * oribi_conn_write. */
#define ORIBI_CORK_MAX (64 * 1024)
/* ... while the app answers pipelined requests within this (µs) on average */
#define ORIBI_CORK_APP_US 50
int oribi_conn_write_last(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
/* Sends kept bytes; same returns as oribi_conn_write. */
int oribi_conn_flush(struct oribi_conn *c);
/* Waits up to timeout_ms for the socket to take bytes; 0 ok, -1 timeout or
 * error. A signal does not end the wait. */
int oribi_conn_wait_writable(struct oribi_conn *c, int64_t timeout_ms);

/* 1 while kept bytes or a handed-over file are still to be sent. */
static inline int oribi_conn_pending(const struct oribi_conn *c)
{
    return c->wlen > c->woff || c->file_fd >= 0;
}

/* Gives the rest of a file (left bytes from off) to the conn: the loop
 * sends it after the kept bytes, so that no app thread waits on a client
 * that reads slowly, or not at all. The conn owns file_fd from now on;
 * spooled: its bytes are counted in the spool budget until sent. */
void oribi_conn_hand_file(struct oribi_conn *c, int file_fd, int64_t off, int64_t left, int spooled);

/* The spool budget (max_worker_spool): takes n bytes, or 0 when they
 * would pass the cap (nothing taken); gives n back. */
int oribi_spool_budget_take(struct oribi_conn *c, size_t n);
void oribi_spool_budget_give(struct oribi_conn *c, int64_t n);

/* Sends fd's bytes from *off up to end with sendfile(2), advancing *off,
 * without waiting: 0 all sent, 1 the socket is full, -1 the peer is gone or
 * the file ended before end. */
int oribi_conn_sendfile(struct oribi_conn *c, int fd, int64_t *off, int64_t end);

/* Sends kept bytes, then the handed-over file, without waiting. Returns 0
 * when all is out, 1 when the socket is full, -1 when the peer is gone or
 * the file ended early (the response's framing is lost: close). */
int oribi_conn_send_pending(struct oribi_conn *c);

/* Forgets what is kept and closes a handed-over file (the conn closes). */
void oribi_conn_discard_output(struct oribi_conn *c);

#endif
