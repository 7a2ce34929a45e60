/*
 * A wakeup another thread can send to a poller's waiter: an eventfd for
 * epoll where the kernel has one (one fd, one counter), else a
 * non-blocking pipe (kqueue watches pipes everywhere; libkqueue cannot
 * watch an eventfd). Its read end goes into the poller as a
 * level-triggered reader.
 */
#ifndef ORIBI_WAKEUP_H
#define ORIBI_WAKEUP_H

struct oribi_wakeup {
    int rfd, wfd; /* the same fd for an eventfd; -1 when closed */
};

/* 0, or -1 with errno (nothing left open). */
int oribi_wakeup_open(struct oribi_wakeup *w);
/* From any thread; async-signal-safe. A full pipe is a wakeup pending. */
void oribi_wakeup_send(const struct oribi_wakeup *w);
/* Takes back what was sent, however many times. */
void oribi_wakeup_drain(const struct oribi_wakeup *w);
void oribi_wakeup_close(struct oribi_wakeup *w);

#endif
