/*
 * A wake-up no worker answers (rake test:wakeup). Two workers' loops in one
 * process, each with its own poller and its own copy of one listener (as
 * forked workers have), sharing a scoreboard head: X holds more than its
 * share of the connections and is behind Z in the worker count, Z is
 * counted as waiting. X sleeps in the poller alone (Z is not in its wait:
 * about to be, as a worker just booted), so under EPOLLEXCLUSIVE the
 * kernel wakes X alone for a new connection. X leaves it to Z (stands
 * aside), and is stopped right then, as a worker retired by a rolling
 * restart is. Then either X took the connection on its way out, or Z is
 * told of it: a client must not wait in the backlog for a worker that was
 * never woken for it. Exits 0 when the connection was taken, 1 if not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loop/internal.h"
#include "fixture.h"

#define KEPT 6 /* X's idle keep-alive clients: over its share of 2 workers */

static struct oribi_loop x, z;
static struct oribi_score_head head;
static struct oribi_score score_x, score_z;
static int port;
static pid_t x_tid; /* atomic */

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static int client(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connect");
    return fd;
}

/* Whether thread tid sleeps in the poller (its wait channel). */
static int in_poller(pid_t tid)
{
    char path[64], wchan[64] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(wchan, 1, sizeof(wchan) - 1, f);
    fclose(f);
    wchan[n] = 0;
    return strstr(wchan, "epoll") != NULL || strstr(wchan, "ep_poll") != NULL;
}

/* X: one wait in the poller (woken by the new connection), then stopped
 * as by USR2, with no drain: the backlog is the other workers'. */
static void *worker_x(void *arg)
{
    (void)arg;
    __atomic_store_n(&x_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    /* until the listener wakes it (a kept client's conn may first) */
    x.sched.backlog = 0;
    for (int i = 0; i < 100 && !x.sched.backlog && x.nconns == KEPT; i++) {
        x.now = oribi_coarse_ms();
        poll_events(&x, 5000);
    }
    oribi_loop_stop(&x, 0);
    return NULL;
}

static void init(struct oribi_loop *loop, struct oribi_score *score, int lfd)
{
    struct oribi_options opt = fixture_options();
    /* what a caller's array may hold in the loop's own fields (engine.c's
     * is not zeroed): the loop starts owing nothing */
    struct oribi_listener l = {.fd = dup(lfd), .owed = 12345};
    if (l.fd < 0 || oribi_loop_init(loop, &opt, &l, 1) < 0)
        die("oribi_loop_init");
    if (loop->listeners[0].owed != 0) {
        fprintf(stderr, "wakeup: a new loop owes %u wake-ups\n", loop->listeners[0].owed);
        exit(1);
    }
    oribi_loop_share(loop, score, &head);
    oribi_score_attach(score, &head);
}

int main(void)
{
    int lfd = fixture_listen(&port);
    init(&x, &score_x, lfd);

    /* X takes KEPT connections while it is the only worker */
    int kept[KEPT];
    for (int i = 0; i < KEPT; i++)
        kept[i] = client();
    for (int tries = 0; x.nconns < KEPT && tries < 1000; tries++) {
        x.now = oribi_coarse_ms();
        poll_events(&x, 10);
    }
    if (x.nconns != KEPT) {
        fprintf(stderr, "wakeup: X took %u of %d connections\n", x.nconns, KEPT);
        return 2;
    }

    /* Z joins; X, over its share now, goes behind it (admit_sleeps) and Z
     * is counted as waiting without being in the poller's wait yet */
    init(&z, &score_z, lfd);
    x.now = z.now = oribi_coarse_ms();
    update_listeners(&z);
    admit_sleeps(&x);
    update_listeners(&x); /* X's listener out and in: the back of the queue */
    x.admit.behind = 1;
    /* and Z's too, later (its app threads were all busy a moment: hold):
     * X is first in the kernel's queue of waiters again */
    z.admit.requeue = 1;
    update_listeners(&z);
    __atomic_add_fetch(&head.waiting, 1, __ATOMIC_RELAXED);

    pthread_t t;
    pthread_create(&t, NULL, worker_x, NULL);
    pid_t tid;
    int asleep = 0;
    for (int tries = 0; !asleep && tries < 5000; tries++) { /* 5 s at most */
        tid = __atomic_load_n(&x_tid, __ATOMIC_ACQUIRE);
        asleep = tid && in_poller(tid);
        if (!asleep)
            usleep(1000); /* polling a condition (X asleep in the poller), bounded */
    }
    if (!asleep) {
        fprintf(stderr, "wakeup: X never slept in the poller (no /proc wchan?)\n");
        return 2;
    }
    int late = client();
    pthread_join(t, NULL);
    __atomic_sub_fetch(&head.waiting, 1, __ATOMIC_RELAXED);

    /* Z, as a worker that now sleeps in the poller: is it told? */
    unsigned before = z.nconns;
    for (int i = 0; i < 5 && z.nconns == before; i++) {
        z.now = oribi_coarse_ms();
        poll_events(&z, 100);
    }
    unsigned taken = (x.nconns - KEPT) + (z.nconns - before);
    printf("wakeup: X took %u on its way out, Z took %u\n", x.nconns - KEPT, z.nconns - before);
    for (int i = 0; i < KEPT; i++)
        close(kept[i]);
    close(late);
    oribi_loop_free(&x);
    oribi_loop_free(&z);
    close(lfd);
    if (taken != 1) {
        fprintf(stderr, "wakeup: the connection that woke X was taken by no worker\n");
        return 1;
    }
    return 0;
}
