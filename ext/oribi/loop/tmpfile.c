#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop/tmpfile.h"

int oribi_tmpfile(const char *dir)
{
#ifdef ORIBI_HAVE_O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
#endif
    char path[4096];
    snprintf(path, sizeof(path), "%s/oribi-XXXXXX", dir);
#ifdef ORIBI_HAVE_MKOSTEMP
    int tmp = mkostemp(path, O_CLOEXEC);
#else
    int tmp = mkstemp(path); /* close-on-exec a moment later: a fork between may inherit it */
    if (tmp >= 0 && fcntl(tmp, F_SETFD, FD_CLOEXEC) < 0) {
        unlink(path);
        close(tmp);
        return -1;
    }
#endif
    if (tmp >= 0)
        unlink(path);
    return tmp;
}

int oribi_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}
