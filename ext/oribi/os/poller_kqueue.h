/*
 * The poller on kqueue (os/poller.h): macOS and the BSDs, and Linux through
 * libkqueue (ORIBI_LIBKQUEUE), which is how it is tested here. kqueue keeps
 * a filter per direction, so a wait merges the read and the write event of
 * one registration into one entry, as epoll reports them (by data pointer:
 * the loop and the load generator give every fd its own). There is no exclusive
 * wakeup: every worker waiting on a listener wakes for a connection, and
 * the ones that find the backlog empty go back to sleep.
 */
#ifndef ORIBI_POLLER_KQUEUE_H
#define ORIBI_POLLER_KQUEUE_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define ORIBI_POLL_IN        0x01u
#define ORIBI_POLL_OUT       0x02u
#define ORIBI_POLL_HUP       0x04u
#define ORIBI_POLL_ERR       0x08u
#define ORIBI_POLL_EDGE      0x10u
#define ORIBI_POLL_EXCLUSIVE 0x00u

struct oribi_poll_batch {
    struct kevent kev[ORIBI_POLL_BATCH];
    struct {
        void *data;
        unsigned events;
        int err;
    } out[ORIBI_POLL_BATCH];
};

static inline int oribi_poller_open(void)
{
    int kq = kqueue();
    if (kq >= 0)
        fcntl(kq, F_SETFD, FD_CLOEXEC);
    return kq;
}

#ifdef ORIBI_LIBKQUEUE
/* libkqueue 2.3 keeps one registration per descriptor: a second filter on
 * a socket fails (EFAULT). So its write filter goes on a duplicate of the
 * descriptor, its twin (poller_kqueue.c), made with the filter and closed
 * with it. Native kqueue needs none of this. */
int oribi_kq_twin(int fd, int make);
void oribi_kq_twin_close(int fd);
#define ORIBI_KQ_WRITE_IDENT(fd, make) oribi_kq_twin(fd, make)
#else
#define ORIBI_KQ_WRITE_IDENT(fd, make) (fd)
#endif

/* One direction's filter: added, or deleted, or left alone when the mask
 * keeps it as it was (libkqueue fails an EV_ADD of a filter it has). */
static inline int oribi_kq_filter(struct kevent *k, int ident, short filter, void *data, unsigned old_mask,
                                  unsigned new_mask, unsigned bit)
{
    unsigned short flags;
    unsigned kept = (old_mask & bit) && !((old_mask ^ new_mask) & ORIBI_POLL_EDGE);
    if ((new_mask & bit) && !kept)
        flags = EV_ADD | ((new_mask & ORIBI_POLL_EDGE) ? EV_CLEAR : 0);
    else if ((old_mask & bit) && !(new_mask & bit))
        flags = EV_DELETE;
    else
        return 0;
    EV_SET(k, (uintptr_t)ident, filter, flags, 0, 0, data);
    return 1;
}

static inline int oribi_poller_set(int pfd, int fd, void *data, unsigned old_mask, unsigned new_mask)
{
    struct kevent ch[2];
    int n = oribi_kq_filter(&ch[0], fd, EVFILT_READ, data, old_mask, new_mask, ORIBI_POLL_IN);
    int w = 0;
    if ((old_mask | new_mask) & ORIBI_POLL_OUT) {
        int ident = ORIBI_KQ_WRITE_IDENT(fd, (new_mask & ORIBI_POLL_OUT) != 0);
        if (ident < 0)
            return -1;
        w = oribi_kq_filter(&ch[n], ident, EVFILT_WRITE, data, old_mask, new_mask, ORIBI_POLL_OUT);
    }
#ifdef ORIBI_LIBKQUEUE
    /* One change per call: libkqueue 2.3 fails a list of two. */
    int r = 0;
    for (int i = 0; i < n + w && r == 0; i++)
        r = kevent(pfd, &ch[i], 1, NULL, 0, NULL);
    if ((old_mask & ORIBI_POLL_OUT) && !(new_mask & ORIBI_POLL_OUT))
        oribi_kq_twin_close(fd);
    return r;
#else
    return n + w ? kevent(pfd, ch, n + w, NULL, 0, NULL) : 0;
#endif
}

static inline void oribi_poller_closing(int pfd, int fd, unsigned mask)
{
#ifdef ORIBI_LIBKQUEUE
    /* libkqueue cannot see a close: a filter left behind would answer for
     * the next socket that gets the same number; and the twin must go. */
    if (mask)
        oribi_poller_set(pfd, fd, NULL, mask, 0);
#else
    (void)pfd, (void)fd, (void)mask; /* closing a descriptor deletes its filters */
#endif
}

static inline int oribi_poller_wait(int pfd, struct oribi_poll_batch *b, int64_t timeout_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000), .tv_nsec = (long)(timeout_ns % 1000000000)};
    int n = kevent(pfd, NULL, 0, b->kev, ORIBI_POLL_BATCH, timeout_ns < 0 ? NULL : &ts);
    int m = 0;
    for (int i = 0; i < n; i++) {
        const struct kevent *k = &b->kev[i];
        unsigned ev;
        if (k->filter == EVFILT_READ)
            ev = ORIBI_POLL_IN | ((k->flags & EV_EOF) ? ORIBI_POLL_HUP : 0) |
                 ((k->flags & EV_EOF) && k->fflags ? ORIBI_POLL_ERR : 0);
        else if (k->filter == EVFILT_WRITE)
            ev = ORIBI_POLL_OUT | ((k->flags & EV_EOF) ? ORIBI_POLL_ERR : 0);
        else
            continue;
        if (k->flags & EV_ERROR)
            ev = ORIBI_POLL_ERR;
        int j = m; /* the fd's other filter may have reported already */
        while (j-- > 0 && b->out[j].data != k->udata)
            ;
        if (j < 0) {
            j = m++;
            b->out[j].data = k->udata;
            b->out[j].events = 0;
            b->out[j].err = 0;
        }
        b->out[j].events |= ev;
        if ((k->flags & EV_EOF) && k->fflags)
            b->out[j].err = (int)k->fflags;
    }
    return n < 0 ? -1 : m;
}

static inline void *oribi_poll_data(const struct oribi_poll_batch *b, int i)
{
    return b->out[i].data;
}

static inline unsigned oribi_poll_events(const struct oribi_poll_batch *b, int i)
{
    return b->out[i].events;
}

static inline int oribi_poll_error(const struct oribi_poll_batch *b, int i)
{
    return b->out[i].err;
}

#endif
