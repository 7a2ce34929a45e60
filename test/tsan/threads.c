/*
 * The worker with app threads, without Ruby, under ThreadSanitizer
 * (rake test:tsan). A dispatcher thread runs the loop without the "GVL"
 * (a mutex standing in for Ruby's); app threads take requests from it,
 * write their responses holding the GVL as rack_response.c does, and hand
 * the connections back (handback.c) waking the loop; client threads send
 * good requests, which go to the app, and bad ones, which the loop answers
 * itself (400) while the app threads are writing. The response head is
 * built from the same pieces as the engine's: status line and date field.
 * TSan reports any two accesses to shared memory that no lock, atomic or
 * fd orders; the run exits non-zero then (halt_on_error), else 0.
 * The app threads' clock ticks at every response, so that the date field
 * is reformatted (once a second in production) all the time while the
 * loop formats its 400s: a race there shows at once, not once a second.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/response.h"
#include "loop/loop.h"
#include "../harness/fixture.h"

#define APP_THREADS    4
#define CLIENT_THREADS 3
#define ROUNDS         200 /* per client: 20 requests on one connection, then a bad one */

static pthread_mutex_t gvl = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static struct oribi_conn *work[1024];
static int nwork, stopping;

static struct oribi_conn *handbacks[1024];
static int nhandbacks;

static struct oribi_loop loop;
static int port;
static int done_clients; /* atomic */

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void *dispatcher(void *arg)
{
    (void)arg;
    for (;;) {
        int r = oribi_loop_run(&loop, 1);
        pthread_mutex_lock(&gvl);
        for (int i = 0; i < nhandbacks; i++)
            oribi_loop_finish(&loop, handbacks[i]);
        nhandbacks = 0;
        struct oribi_conn *c;
        while (nwork < (int)(sizeof(work) / sizeof(work[0])) && (c = oribi_loop_take(&loop)))
            work[nwork++] = c;
        pthread_cond_broadcast(&work_cond);
        int stop = __atomic_load_n(&done_clients, __ATOMIC_ACQUIRE) == CLIENT_THREADS;
        if (stop)
            stopping = 1;
        pthread_mutex_unlock(&gvl);
        if (stop || r == LOOP_STOPPED)
            break;
    }
    pthread_cond_broadcast(&work_cond);
    return NULL;
}

/* An app thread: what engine_respond and rack_response.c do for a plain
 * response, in the same order and under the same lock. */
static void *app(void *arg)
{
    long id = (long)arg;
    static const int statuses[] = {200, 404, 400, 201, 408, 500, 204, 302};
    unsigned k = 0;
    struct oribi_date_cache date = {0}; /* an exchange's */
    pthread_mutex_lock(&gvl);
    for (;;) {
        while (!nwork && !stopping)
            pthread_cond_wait(&work_cond, &gvl);
        if (!nwork)
            break;
        struct oribi_conn *c = work[--nwork];
        int status = statuses[(id + k++) % 8];
        char head[256];
        size_t n, len = 0;
        const char *p = oribi_status_line(status, &n);
        memcpy(head + len, p, n);
        len += n;
        p = oribi_date_header(&date, time(NULL) + (k & 1), &n);
        memcpy(head + len, p, n);
        len += n;
        len += oribi_content_length(head + len, 2);
        memcpy(head + len, "\r\nok", 4);
        len += 4;
        struct iovec iov = {head, len};
        if (oribi_conn_write(c, &iov, 1) < 0)
            oribi_conn_no_keepalive(c);
        handbacks[nhandbacks++] = c;
        oribi_loop_wake(&loop);
    }
    pthread_mutex_unlock(&gvl);
    return NULL;
}

static int client_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connect");
    return fd;
}

/* Reads until the response's last byte ("ok", or the 400's text) or EOF. */
static int read_response(int fd, const char *end)
{
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return len ? 0 : -1;
        len += (size_t)n;
        buf[len] = 0;
        if (strstr(buf, end))
            return 0;
    }
}

static void *client(void *arg)
{
    (void)arg;
    static const char good[] = "GET / HTTP/1.1\r\nhost: x\r\n\r\n";
    static const char bad[] = "GET / HTTP/1.1\r\nhost: x\r\nno colon\r\n\r\n";
    for (int round = 0; round < ROUNDS; round++) {
        int fd = client_connect();
        for (int i = 0; i < 20; i++) {
            if (write(fd, good, sizeof(good) - 1) < 0 || read_response(fd, "\r\nok") < 0)
                die("keep-alive request");
        }
        close(fd);
        fd = client_connect();
        if (write(fd, bad, sizeof(bad) - 1) < 0 || read_response(fd, "Bad Request\n") < 0)
            die("bad request");
        close(fd);
    }
    __atomic_add_fetch(&done_clients, 1, __ATOMIC_RELEASE);
    oribi_loop_wake(&loop);
    return NULL;
}

int main(void)
{
    int lfd = fixture_listen(&port);

    struct oribi_options opt = fixture_options();
    struct oribi_listener l = {.fd = lfd};
    if (oribi_loop_init(&loop, &opt, &l, 1) < 0)
        die("oribi_loop_init");

    pthread_t d, apps[APP_THREADS], clients[CLIENT_THREADS];
    pthread_create(&d, NULL, dispatcher, NULL);
    for (long i = 0; i < APP_THREADS; i++)
        pthread_create(&apps[i], NULL, app, (void *)i);
    for (int i = 0; i < CLIENT_THREADS; i++)
        pthread_create(&clients[i], NULL, client, NULL);
    for (int i = 0; i < CLIENT_THREADS; i++)
        pthread_join(clients[i], NULL);
    pthread_join(d, NULL);
    for (int i = 0; i < APP_THREADS; i++)
        pthread_join(apps[i], NULL);
    oribi_loop_free(&loop);
    close(lfd);
    puts("tsan: no race reported");
    return 0;
}
