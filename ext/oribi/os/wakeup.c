#include "os/wakeup.h"

#if defined(ORIBI_HAVE_EVENTFD) && defined(ORIBI_POLL_EPOLL)
#define WAKEUP_EVENTFD
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#ifdef WAKEUP_EVENTFD
#include <sys/eventfd.h>
#endif

int oribi_wakeup_open(struct oribi_wakeup *w)
{
#ifdef WAKEUP_EVENTFD
    w->rfd = w->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return w->rfd < 0 ? -1 : 0;
#else
    int p[2];
    if (pipe(p) < 0) {
        w->rfd = w->wfd = -1;
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (fcntl(p[i], F_SETFD, FD_CLOEXEC) < 0 || fcntl(p[i], F_SETFL, O_NONBLOCK) < 0) {
            int err = errno;
            close(p[0]);
            close(p[1]);
            w->rfd = w->wfd = -1;
            errno = err;
            return -1;
        }
    }
    w->rfd = p[0];
    w->wfd = p[1];
    return 0;
#endif
}

void oribi_wakeup_send(const struct oribi_wakeup *w)
{
    uint64_t one = 1; /* an eventfd takes 8 bytes; a pipe the first of them */
#ifdef WAKEUP_EVENTFD
    ssize_t r = write(w->wfd, &one, sizeof(one));
#else
    ssize_t r = write(w->wfd, &one, 1);
#endif
    (void)r;
}

void oribi_wakeup_drain(const struct oribi_wakeup *w)
{
    uint64_t buf[8];
#ifdef WAKEUP_EVENTFD
    ssize_t r = read(w->rfd, buf, sizeof(buf[0]));
    (void)r;
#else
    while (read(w->rfd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
        ;
#endif
}

void oribi_wakeup_close(struct oribi_wakeup *w)
{
    if (w->rfd >= 0)
        close(w->rfd);
    if (w->wfd >= 0 && w->wfd != w->rfd)
        close(w->wfd);
    w->rfd = w->wfd = -1;
}
