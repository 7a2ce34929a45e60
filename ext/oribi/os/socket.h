/*
 * Socket calls that differ between Linux and the BSDs, chosen by
 * extconf.rb's checks (ORIBI_HAVE_*), never by the OS's name:
 *   - accept4 sets non-blocking and close-on-exec in the same call; else
 *     accept and two fcntl;
 *   - MSG_NOSIGNAL makes a write to a gone peer EPIPE, not SIGPIPE; else
 *     SO_NOSIGPIPE on the socket (macOS, FreeBSD), and where neither
 *     exists Ruby's own SIGPIPE disposition (ignored) covers it;
 *   - MSG_MORE (a head before a file body may share a segment) is a hint
 *     that costs nothing to leave out.
 */
#ifndef ORIBI_SOCKET_H
#define ORIBI_SOCKET_H

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef ORIBI_HAVE_MSG_NOSIGNAL
#define ORIBI_MSG_NOSIGNAL MSG_NOSIGNAL
#else
#define ORIBI_MSG_NOSIGNAL 0
#endif

#ifdef ORIBI_HAVE_MSG_MORE
#define ORIBI_MSG_MORE MSG_MORE
#else
#define ORIBI_MSG_MORE 0
#endif

/* A socket that writes to a gone peer fail with EPIPE, where send flags
 * cannot say so. */
static inline void oribi_nosigpipe(int fd)
{
#if !defined(ORIBI_HAVE_MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#else
    (void)fd;
#endif
}

/* A new socket made ready where one call could not: non-blocking,
 * close-on-exec, no SIGPIPE; closed on failure. fd may be -1 (the call
 * failed): passed on. */
static inline int oribi_socket_ready(int fd)
{
    if (fd < 0)
        return fd;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        close(fd);
        return -1;
    }
    oribi_nosigpipe(fd);
    return fd;
}

/* accept, the new socket non-blocking and close-on-exec. */
static inline int oribi_accept(int lfd, struct sockaddr *sa, socklen_t *len)
{
#ifdef ORIBI_HAVE_ACCEPT4
    return accept4(lfd, sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    return oribi_socket_ready(accept(lfd, sa, len));
#endif
}

/* socket, non-blocking and close-on-exec. */
static inline int oribi_socket(int domain, int type, int protocol)
{
#ifdef ORIBI_HAVE_SOCK_NONBLOCK
    return socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
#else
    return oribi_socket_ready(socket(domain, type, protocol));
#endif
}

#endif
