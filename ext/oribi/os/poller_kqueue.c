/*
 * libkqueue's twins (poller_kqueue.h): the duplicate of a socket that
 * carries its write filter, by the socket's fd. Registrations come from
 * the loop's thread and from app threads (a hijack), so the table is
 * locked; it is only touched when a write filter comes or goes.
 */
#if defined(ORIBI_POLL_KQUEUE) && defined(ORIBI_LIBKQUEUE)
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/poller.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int *twins; /* twins[fd]: its twin + 1, 0 for none */
static int ntwins;

int oribi_kq_twin(int fd, int make)
{
    int twin = -1;
    pthread_mutex_lock(&lock);
    if (fd < ntwins && twins[fd]) {
        twin = twins[fd] - 1;
    } else if (make) {
        if (fd >= ntwins) {
            int n = ntwins ? ntwins : 1024;
            while (n <= fd)
                n *= 2;
            int *t = realloc(twins, (size_t)n * sizeof(*t));
            if (t) {
                memset(t + ntwins, 0, (size_t)(n - ntwins) * sizeof(*t));
                twins = t;
                ntwins = n;
            }
        }
        if (fd < ntwins && (twin = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0)
            twins[fd] = twin + 1;
    }
    pthread_mutex_unlock(&lock);
    return twin;
}

void oribi_kq_twin_close(int fd)
{
    int twin = -1;
    pthread_mutex_lock(&lock);
    if (fd < ntwins && twins[fd]) {
        twin = twins[fd] - 1;
        twins[fd] = 0;
    }
    pthread_mutex_unlock(&lock);
    if (twin >= 0)
        close(twin);
}
#endif
