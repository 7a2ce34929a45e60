/*
 * The spare fd: one descriptor held back so that running out of them
 * (EMFILE) costs a shed or a pause, not a connection closed under its
 * client. An accept that finds none left closes it to make room
 * (accept.c), a watch that takes an fd of its own spends it (conn.c), and
 * a close brings it back.
 */
#include "loop/internal.h"

#include <fcntl.h>
#include <unistd.h>

/* The spare fd back in place, when the fd it gave up is free again. */
void spare_restore(struct oribi_loop *loop)
{
    if (loop->spare_fd < 0)
        loop->spare_fd = fcntl(loop->wake.rfd, F_DUPFD_CLOEXEC, 0);
}

/* Gives the spare's place up, 0 if it is gone already. A watch that takes
 * an fd of its own (libkqueue's twin) found none left: the conn just taken
 * is kept, not closed under its client; the next accept then finds EMFILE
 * and pauses, as where a watch costs no fd, until a close brings the spare
 * back. */
int spare_spend(struct oribi_loop *loop)
{
    if (loop->spare_fd < 0)
        return 0;
    close(loop->spare_fd);
    loop->spare_fd = -1;
    return 1;
}
