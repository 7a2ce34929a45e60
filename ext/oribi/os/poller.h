/*
 * Readiness: which sockets may be read or written now. One small face over
 * the kernel's mechanism, chosen when the extension is built (extconf.rb):
 * epoll on Linux (poller_epoll.h), kqueue on macOS and the BSDs, or through
 * libkqueue on Linux (poller_kqueue.h). Everything is inline: the loop's
 * hot path pays no call for the indirection.
 *
 * A registration is a mask of the ORIBI_POLL_* bits below, with the data
 * pointer that comes back with its events. A wait fills a batch; what it
 * reported is read through oribi_poll_data and oribi_poll_events, one
 * entry per fd however many filters the kernel keeps for it.
 */
#ifndef ORIBI_POLLER_H
#define ORIBI_POLLER_H

#ifndef ORIBI_POLL_BATCH
#define ORIBI_POLL_BATCH 64 /* entries one wait reports at most (an includer may ask for more) */
#endif

#if defined(ORIBI_POLL_EPOLL)
#include "os/poller_epoll.h"
#elif defined(ORIBI_POLL_KQUEUE)
#include "os/poller_kqueue.h"
#else
#error "no event loop chosen: extconf.rb defines ORIBI_POLL_EPOLL or ORIBI_POLL_KQUEUE"
#endif

/* Registration and results, defined by each backend:
 *   ORIBI_POLL_IN        readable (registration and result)
 *   ORIBI_POLL_OUT       writable (registration and result)
 *   ORIBI_POLL_HUP       the peer closed its side: read on to EOF (a
 *                        registration asks to be told of it)
 *   ORIBI_POLL_ERR       an error or a full hangup (result only)
 *   ORIBI_POLL_EDGE      report a change once, not while it lasts
 *   ORIBI_POLL_EXCLUSIVE one waiter wakes per event where the kernel can
 *                        (epoll); every waiter elsewhere
 *
 *   int   oribi_poller_open(void)      a new set, close-on-exec; -1 errno
 *   int   oribi_poller_set(pfd, fd, data, old_mask, new_mask)
 *                                      adds (old 0), changes, or removes
 *                                      (new 0) a registration; its data
 *                                      stays what it was added with
 *   void  oribi_poller_closing(pfd, fd, mask)
 *                                      before close(fd) of a registered fd:
 *                                      nothing where closing forgets it
 *   int   oribi_poller_wait(pfd, batch, timeout_ns)
 *                                      waits up to timeout_ns (-1: no limit)
 *                                      → entries in batch, -1 errno
 *   void *oribi_poll_data(batch, i)    the registration's data pointer
 *   unsigned oribi_poll_events(batch, i)
 *   int   oribi_poll_error(batch, i)   the socket's error with ORIBI_POLL_ERR
 *                                      where the poller took it (libkqueue
 *                                      reads SO_ERROR, which clears it), or 0:
 *                                      ask SO_ERROR
 */

#endif
