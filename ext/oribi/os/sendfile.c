#include "os/sendfile.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "os/socket.h"

#if defined(ORIBI_HAVE_LINUX_SENDFILE)
#include <sys/sendfile.h>

ssize_t oribi_sendfile(int out, int in, int64_t *off, size_t count)
{
    off_t o = (off_t)*off;
    ssize_t n = sendfile(out, in, &o, count);
    if (n > 0)
        *off += n;
    return n;
}

#elif defined(ORIBI_HAVE_BSD_SENDFILE) || defined(ORIBI_HAVE_DARWIN_SENDFILE)
#include <sys/uio.h>

/* Both may send part and still fail with EAGAIN (or EINTR): the part
 * counts. */
ssize_t oribi_sendfile(int out, int in, int64_t *off, size_t count)
{
#ifdef ORIBI_HAVE_BSD_SENDFILE
    off_t sent = 0;
    int r = sendfile(in, out, (off_t)*off, count, NULL, &sent, 0);
#else
    off_t sent = (off_t)count;
    int r = sendfile(in, out, (off_t)*off, &sent, NULL, 0);
#endif
    if (sent > 0) {
        *off += sent;
        return (ssize_t)sent;
    }
    return r < 0 ? -1 : 0;
}

#else

ssize_t oribi_sendfile(int out, int in, int64_t *off, size_t count)
{
    char buf[65536];
    ssize_t got = pread(in, buf, count < sizeof(buf) ? count : sizeof(buf), (off_t)*off);
    if (got <= 0)
        return got;
    ssize_t n = send(out, buf, (size_t)got, ORIBI_MSG_NOSIGNAL);
    if (n > 0)
        *off += n;
    return n;
}

#endif
