/*
 * The poller on epoll (os/poller.h). The ORIBI_POLL_* bits are epoll's
 * own, and a batch is epoll's array: the loop reads what the kernel wrote.
 * Timeouts in whole milliseconds go to epoll_wait; finer ones to
 * epoll_pwait2 (Linux 5.11) where it exists, else rounded down.
 */
#ifndef ORIBI_POLLER_EPOLL_H
#define ORIBI_POLLER_EPOLL_H

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>

#define ORIBI_POLL_IN   EPOLLIN
#define ORIBI_POLL_OUT  EPOLLOUT
#define ORIBI_POLL_HUP  EPOLLRDHUP
#define ORIBI_POLL_ERR  (EPOLLERR | EPOLLHUP)
#define ORIBI_POLL_EDGE EPOLLET
#ifdef EPOLLEXCLUSIVE
#define ORIBI_POLL_EXCLUSIVE EPOLLEXCLUSIVE
#else
#define ORIBI_POLL_EXCLUSIVE 0
#endif

struct oribi_poll_batch {
    struct epoll_event ev[ORIBI_POLL_BATCH];
};

static inline int oribi_poller_open(void)
{
    return epoll_create1(EPOLL_CLOEXEC);
}

static inline int oribi_poller_set(int pfd, int fd, void *data, unsigned old_mask, unsigned new_mask)
{
    struct epoll_event ev = {.events = new_mask, .data.ptr = data};
    int op = !new_mask ? EPOLL_CTL_DEL : old_mask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    return epoll_ctl(pfd, op, fd, &ev);
}

static inline void oribi_poller_closing(int pfd, int fd, unsigned mask)
{
    (void)pfd, (void)fd, (void)mask; /* closing the last fd of a socket leaves every epoll set */
}

static inline int oribi_poller_wait(int pfd, struct oribi_poll_batch *b, int64_t timeout_ns)
{
    if (timeout_ns < 0 || timeout_ns % 1000000 == 0)
        return epoll_wait(pfd, b->ev, ORIBI_POLL_BATCH, timeout_ns < 0 ? -1 : (int)(timeout_ns / 1000000));
#ifdef ORIBI_HAVE_EPOLL_PWAIT2
    static int no_pwait2; /* the kernel is older than the headers: the same answer for every thread */
    if (!__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000), .tv_nsec = (long)(timeout_ns % 1000000000)};
        int n = epoll_pwait2(pfd, b->ev, ORIBI_POLL_BATCH, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        __atomic_store_n(&no_pwait2, 1, __ATOMIC_RELAXED);
    }
#endif
    return epoll_wait(pfd, b->ev, ORIBI_POLL_BATCH, (int)(timeout_ns / 1000000));
}

static inline void *oribi_poll_data(const struct oribi_poll_batch *b, int i)
{
    return b->ev[i].data.ptr;
}

static inline unsigned oribi_poll_events(const struct oribi_poll_batch *b, int i)
{
    return b->ev[i].events;
}

static inline int oribi_poll_error(const struct oribi_poll_batch *b, int i)
{
    (void)b, (void)i; /* SO_ERROR tells */
    return 0;
}

#endif
