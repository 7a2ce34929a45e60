/*
 * A response spooled to an unlinked tmpfile. When a client reads slower
 * than the app writes and its conn already keeps its share of the write
 * budget, the rest of the response goes to disk instead of holding the app
 * thread: the thread sends from the spool whenever the client has caught
 * up, and what is left when the response ends is handed to the conn, for
 * the loop to send with sendfile(2). Used by app threads only.
 */
#ifndef ORIBI_SPOOL_H
#define ORIBI_SPOOL_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop/conn.h"

struct oribi_spool {
    int fd;                  /* the tmpfile, -1 until the first byte */
    int64_t len;             /* bytes written to it */
    int64_t sent;            /* of which the client took */
    struct oribi_conn *conn; /* whose spool budget len - sent is counted in */
};

#define ORIBI_SPOOL_INIT \
    {                    \
        .fd = -1         \
    }

/* Appends iov after the spooled bytes (opening the tmpfile in dir at
 * first), counted in c's spool budget; 0, 1 when the budget has no room
 * for them (max_worker_spool), or -1 with errno set; nothing appended
 * unless 0. */
int oribi_spool_append(struct oribi_spool *s, struct oribi_conn *c, const char *dir, const struct iovec *iov,
                       int iovcnt);

/* Sends what the conn keeps, then what is spooled, without waiting:
 * 0 all is out (the spool is emptied for reuse), 1 the socket is full,
 * -1 the peer is gone. */
int oribi_spool_send(struct oribi_spool *s, struct oribi_conn *c);

/* Gives what is not sent yet to the conn, which sends it after its kept
 * bytes; the spool is closed either way. */
void oribi_spool_hand(struct oribi_spool *s, struct oribi_conn *c);

/* Closes the tmpfile (a response that ended early). */
void oribi_spool_close(struct oribi_spool *s);

#endif
