/*
 * Writing to a client connection: what the socket does not take at once is
 * kept in the conn's write buffer, flushed by the loop or by a caller that
 * waits. Files go out with sendfile(2). Nothing here takes the GVL, and
 * nothing blocks except the two functions that say they wait.
 */
#ifndef ORIBI_OUTPUT_H
#define ORIBI_OUTPUT_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop/conn.h"

#define ORIBI_WRITE_BACKLOG (1024 * 1024)

/* Writes iov; bytes the socket does not take now are kept and flushed by
 * the loop. Returns 0, 1 when the kept backlog is over ORIBI_WRITE_BACKLOG
 * (wait with oribi_conn_wait_writable, then oribi_conn_flush), or -1 when
 * the peer is gone. Never blocks. */
int oribi_conn_write(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
/* The same with MSG_MORE: more bytes follow at once (a head before a
 * sendfile), so the kernel may put them in one segment. */
int oribi_conn_write_more(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
/* Sends kept bytes; same returns as oribi_conn_write. */
int oribi_conn_flush(struct oribi_conn *c);
/* Waits up to timeout_ms for the socket to take bytes; 0 ok, -1 timeout or
 * error. A signal does not end the wait. */
int oribi_conn_wait_writable(struct oribi_conn *c, int64_t timeout_ms);

enum { ORIBI_SEND_DONE = 0, ORIBI_SEND_SHORT = 1, ORIBI_SEND_INTR = 2, ORIBI_SEND_FAIL = -1 };
/* Sends *left bytes of file_fd from *off with sendfile(2), the kept buffer
 * being empty. Waits for the socket up to timeout_ms each time it is full.
 * Returns ORIBI_SEND_DONE, ORIBI_SEND_SHORT (the file ended early),
 * ORIBI_SEND_INTR (a signal came: handle it and call again; *off and *left
 * say where it stopped) or ORIBI_SEND_FAIL (peer gone, or no progress for
 * timeout_ms). */
int oribi_conn_sendfile(struct oribi_conn *c, int file_fd, int64_t *off, int64_t *left, int64_t timeout_ms);

#endif
