/*
 * Load generator engine (see loadgen.h): sets a run up, starts one thread per
 * slice of connections (loadgen_conn.c), and merges what they measured.
 * Threads share nothing while running but the read-only request, the stop
 * flag and, in request-count mode, an atomic counter of claimed requests.
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>
#include "loadgen_internal.h"

#define PROBE_MS 1000 /* per address when a name has several */

/* RFC 9110 9.2.2: the methods a client may repeat without asking. */
static int idempotent(const char *p, size_t len)
{
    static const char *const methods[] = {"GET ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "TRACE "};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        size_t n = strlen(methods[i]);
        if (len >= n && memcmp(p, methods[i], n) == 0)
            return 1;
    }
    return 0;
}

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int stage_ok(const struct oribi_lg_stage *st)
{
    return st->from >= 0 && st->from <= 1e8 && st->to >= 0 && st->to <= 1e8 && st->seconds > 0 && st->seconds <= 1e7 &&
           (st->from > 0 || st->to > 0 || st->from == st->to);
}

/* Stages as offsets from the end of the warm-up: -1 with a message when
 * one is out of range or none sends anything. */
static int copy_stages(struct oribi_lg *lg, const struct oribi_lg_config *cfg, char *err, size_t errlen)
{
    if (cfg->nstages == 0)
        return 0;
    if (cfg->stages == NULL || cfg->nstages > ORIBI_LG_STAGES_MAX || !(cfg->rate > 0)) {
        snprintf(err, errlen, "1 to %d stages, with a rate", ORIBI_LG_STAGES_MAX);
        return -1;
    }
    lg->stages = calloc(cfg->nstages, sizeof(*lg->stages));
    if (lg->stages == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t at = 0;
    int sends = 0;
    for (unsigned i = 0; i < cfg->nstages; i++) {
        const struct oribi_lg_stage *st = &cfg->stages[i];
        if (!stage_ok(st)) {
            snprintf(err, errlen, "stage %u: rates 0 to 1e8 per second, for 0 to 1e7 seconds", i + 1);
            return -1;
        }
        sends |= st->from > 0 || st->to > 0;
        lg->stages[i] = (struct lg_stage){.from = st->from, .to = st->to, .start = at};
        at += (uint64_t)(st->seconds * 1e9);
        lg->stages[i].end = at;
    }
    if (!sends) {
        snprintf(err, errlen, "every stage has a rate of 0");
        return -1;
    }
    lg->nstages = cfg->nstages;
    return 0;
}

/* Seconds from t (ns into a stage) until `need` more sends are due at a rate
 * going linearly from `from` to `to` over the stage, or -1 when they are
 * not due before the stage ends (*got: how many are). */
static double stage_wait(const struct lg_stage *st, double t, double need, double *got)
{
    double len = (double)(st->end - st->start) / 1e9, x = t / 1e9;
    double slope = (st->to - st->from) / len; /* requests per second, per second */
    double now = fmax(0, st->from + slope * x), left = len - x;
    *got = now * left + slope * left * left / 2;
    /* A send due right at the end belongs to the next stage: after a
     * stage at rate 0, it goes when that one starts, not as it begins. */
    if (*got <= need + 1e-9)
        return -1;
    /* now * dt + slope * dt^2 / 2 = need, in the form that stays exact
     * when slope is 0 or tiny. */
    return 2 * need / (now + sqrt(fmax(0, now * now + 2 * slope * need)));
}

uint64_t lg_advance(const struct oribi_lg *lg, uint64_t due, double need)
{
    /* The warm-up runs at the first stage's opening rate. */
    const struct lg_stage *first = &lg->stages[0];
    double r = first->from > 0 ? first->from : first->to;
    if (due < lg->count_from_ns && r > 0) {
        double before = (double)(lg->count_from_ns - due) / 1e9 * r;
        if (before > need)
            return due + (uint64_t)ceil(need / r * 1e9);
        need -= before;
    }
    if (due < lg->count_from_ns)
        due = lg->count_from_ns;
    uint64_t t = due - lg->count_from_ns;
    for (unsigned i = 0; i < lg->nstages; i++) {
        const struct lg_stage *st = &lg->stages[i];
        if (t >= st->end)
            continue;
        /* Due where the last stage ended: at the start of the next one
         * that sends (a stage at rate 0 is a pause). */
        if (need < 1e-6)
            need = 1e-6;
        double got, dt = stage_wait(st, (double)(t - st->start), need, &got);
        /* Rounded up: a send exactly at a stage's end (or the deadline)
         * must not creep before it by a nanosecond a step. */
        if (dt >= 0)
            return lg->count_from_ns + t + (uint64_t)ceil(dt * 1e9);
        need -= got;
        t = st->end;
    }
    return UINT64_MAX; /* after the last stage: never */
}

uint64_t lg_next_due(const struct oribi_lg *lg, uint64_t due)
{
    if (lg->stages == NULL)
        return due + lg->interval_ns;
    return lg_advance(lg, due, lg->threads);
}

struct oribi_lg *oribi_lg_new(const struct oribi_lg_config *cfg, char *err, size_t errlen)
{
    if (cfg->request == NULL || cfg->request_len == 0 || cfg->connections == 0 || cfg->threads == 0 ||
        !(cfg->timeout > 0) || (!(cfg->duration > 0) && cfg->requests == 0) || cfg->rate < 0 ||
        (cfg->rate > 0 && cfg->rate > 1e8) || (cfg->unix_path == NULL && (cfg->host == NULL || cfg->port == NULL))) {
        snprintf(err, errlen, "invalid load generator configuration");
        return NULL;
    }
    struct oribi_lg *lg = calloc(1, sizeof(*lg));
    if (lg == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int woke = oribi_wakeup_open(&lg->stop_wake);
    lg->output_fd = cfg->output_fd;
    pthread_mutex_init(&lg->output_lock, NULL);
    lg->request = malloc(cfg->request_len);
    if (cfg->unix_path) {
        lg->unix_path = dupstr(cfg->unix_path);
    } else {
        lg->host = dupstr(cfg->host);
        lg->port = dupstr(cfg->port);
    }
    if (woke < 0 || lg->request == NULL ||
        (cfg->unix_path ? lg->unix_path == NULL : (lg->host == NULL || lg->port == NULL))) {
        snprintf(err, errlen, "cannot allocate the run: %s", strerror(errno));
        oribi_lg_free(lg);
        return NULL;
    }
    memcpy(lg->request, cfg->request, cfg->request_len);
    lg->request_len = cfg->request_len;
    lg->nreqs = cfg->request_ends ? cfg->nrequests : 1;
    lg->reqs = calloc(lg->nreqs ? lg->nreqs : 1, sizeof(*lg->reqs));
    if (lg->reqs == NULL || lg->nreqs == 0) {
        snprintf(err, errlen, lg->reqs ? "no requests" : "out of memory");
        oribi_lg_free(lg);
        return NULL;
    }
    size_t from = 0;
    for (unsigned i = 0; i < lg->nreqs; i++) {
        size_t end = cfg->request_ends ? cfg->request_ends[i] : cfg->request_len;
        if (end <= from || end > cfg->request_len) {
            snprintf(err, errlen, "request %u is empty or out of bounds", i);
            oribi_lg_free(lg);
            return NULL;
        }
        struct lg_req *r = &lg->reqs[i];
        r->p = lg->request + from;
        r->len = end - from;
        r->is_head = r->len >= 5 && memcmp(r->p, "HEAD ", 5) == 0;
        r->idempotent = idempotent(r->p, r->len);
        from = end;
    }
    if (cfg->tls && (lg->tls = lg_tls_new(cfg->server_name, cfg->insecure, cfg->tls_resume, err, errlen)) == NULL) {
        oribi_lg_free(lg);
        return NULL;
    }
    if (copy_stages(lg, cfg, err, errlen) < 0) {
        oribi_lg_free(lg);
        return NULL;
    }
    lg->connections = cfg->connections;
    if (cfg->rate > 0) {
        /* Connections are a cap, opened as the schedule needs them. */
        lg->connections = cfg->max_connections;
        lg->threads = cfg->threads < lg->connections ? cfg->threads : lg->connections;
        lg->interval_ns = (uint64_t)(1e9 * lg->threads / cfg->rate);
        if (lg->interval_ns == 0)
            lg->interval_ns = 1;
    } else {
        lg->threads = cfg->threads < cfg->connections ? cfg->threads : cfg->connections;
    }
    lg->requests = cfg->requests;
    lg->duration_ns = cfg->duration > 0 ? (uint64_t)(cfg->duration * 1e9) : 0;
    lg->timeout_ns = (uint64_t)(cfg->timeout * 1e9);
    if (lg->timeout_ns == 0)
        lg->timeout_ns = 1;
    lg->keepalive = cfg->keepalive;
    lg->series_ns = cfg->series_interval > 0 ? (uint64_t)(cfg->series_interval * 1e9) : 0;
    lg->warmup_ns = cfg->warmup > 0 ? (uint64_t)(cfg->warmup * 1e9) : 0;
    lg->progress = calloc(lg->threads, sizeof(*lg->progress));
    if (lg->progress == NULL) {
        snprintf(err, errlen, "out of memory");
        oribi_lg_free(lg);
        return NULL;
    }
    return lg;
}

void oribi_lg_stop(struct oribi_lg *lg)
{
    atomic_store(&lg->stop, 1);
    /* Level-triggered in every worker's poller and never read: one send
     * wakes all of them, now and in any later wait. */
    oribi_wakeup_send(&lg->stop_wake);
}

void oribi_lg_free(struct oribi_lg *lg)
{
    if (lg == NULL)
        return;
    oribi_wakeup_close(&lg->stop_wake);
    free(lg->host);
    free(lg->port);
    free(lg->unix_path);
    free(lg->request);
    free(lg->reqs);
    free(lg->stages);
    free(lg->progress);
    pthread_mutex_destroy(&lg->output_lock);
    lg_tls_free(lg->tls);
    free(lg);
}

void oribi_lg_progress(const struct oribi_lg *lg, uint64_t *done, uint64_t *failed)
{
    *done = *failed = 0;
    for (unsigned i = 0; i < lg->threads; i++) {
        *done += atomic_load_explicit(&lg->progress[i].done, memory_order_relaxed);
        *failed += atomic_load_explicit(&lg->progress[i].failed, memory_order_relaxed);
    }
}

/* Connects and closes at once: whether this address answers at all. */
static int probe(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!ok && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t len = sizeof(err);
        ok = poll(&pfd, 1, PROBE_MS) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    close(fd);
    return ok;
}

/* 1 to 65535 in decimal digits only: getaddrinfo would take 99999 modulo
 * 65536 and quietly aim at another port. */
static int port_ok(const char *s)
{
    unsigned long v = 0;
    if (*s == '\0')
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (v = v * 10 + (unsigned long)(*s - '0')) > 65535)
            return 0;
    }
    return v > 0;
}

static int resolve(struct oribi_lg *lg, char *err, size_t errlen)
{
    if (lg->unix_path) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&lg->addr;
        size_t n = strlen(lg->unix_path);
        if (n == 0 || n >= sizeof(sun->sun_path)) {
            snprintf(err, errlen, "unix socket path empty or longer than %zu bytes", sizeof(sun->sun_path) - 1);
            return -1;
        }
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, lg->unix_path, n + 1);
        lg->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
        return 0;
    }
    if (!port_ok(lg->port)) {
        snprintf(err, errlen, "bad port %.16s (1 to 65535)", lg->port);
        return -1;
    }
    /* "[::1]" is how IPv6 literals are written next to a port. */
    char *host = lg->host;
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        host++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, lg->port, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "cannot resolve %s port %s: %s", host, lg->port, rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    /* A name may give ::1 and 127.0.0.1 while the server listens on one:
     * take the first that accepts, else the first (its errors will count). */
    const struct addrinfo *pick = res;
    if (res->ai_next)
        for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
            if (probe(ai)) {
                pick = ai;
                break;
            }
    memcpy(&lg->addr, pick->ai_addr, pick->ai_addrlen);
    lg->addrlen = pick->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static void merge(struct oribi_lg_result *res, const struct lg_worker *w)
{
    res->requests += w->requests;
    for (int k = 0; k < ORIBI_LG_E_COUNT; k++) {
        res->errors[k] += w->errors[k];
        for (int e = 0; e < ORIBI_LG_ERRNO_MAX; e++)
            res->causes[k][e] += w->causes[k][e];
    }
    for (int s = 0; s < 600; s++)
        res->status[s] += w->status[s];
    res->bytes_in += w->bytes_in;
    res->bytes_out += w->bytes_out;
    res->late += w->late;
    res->dropped += w->dropped;
    res->behind += w->behind;
    res->sent += w->sent;
    res->retried += w->retried;
    oribi_hist_merge(&res->latency, w->hist);
}

static void workers_free(struct lg_worker *ws, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        lg_worker_free(&ws[i]);
    free(ws);
}

int oribi_lg_run(struct oribi_lg *lg, struct oribi_lg_result *res, char *err, size_t errlen)
{
    memset(res, 0, offsetof(struct oribi_lg_result, latency));
    oribi_hist_init(&res->latency);
    if (resolve(lg, err, errlen) < 0)
        return -1;

    unsigned nt = lg->threads;
    struct lg_worker *ws = calloc(nt, sizeof(*ws));
    if (ws == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < nt; i++) {
        ws[i].pfd = -1;
        ws[i].index = i;
        ws[i].next_req = i % lg->nreqs;
    }
    for (unsigned i = 0; i < nt; i++) {
        unsigned share = lg->connections / nt + (i < lg->connections % nt);
        if (lg_worker_init(lg, &ws[i], share) < 0) {
            snprintf(err, errlen, "cannot set up thread %u: %s", i, strerror(errno));
            workers_free(ws, nt);
            return -1;
        }
    }

    /* Signals stay with the Ruby threads: ours block them all, so Ctrl-C
     * reaches Ruby, which calls oribi_lg_stop(). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    lg->start_ns = lg_now_ns();
    lg->count_from_ns = lg->start_ns + lg->warmup_ns;
    res->start_unix_ns = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec + lg->warmup_ns;
    lg->deadline_ns = lg->duration_ns ? lg->count_from_ns + lg->duration_ns : 0;
    for (unsigned i = 0; i < nt; i++) /* open loop: threads take turns */
        ws[i].next_due = lg->stages ? lg_advance(lg, lg->start_ns, i) : lg->start_ns + lg->interval_ns * i / nt;
    unsigned started = 0;
    int rc = 0;
    for (; started < nt; started++) {
        rc = pthread_create(&ws[started].tid, NULL, lg_worker_main, &ws[started]);
        if (rc != 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < nt) {
        oribi_lg_stop(lg);
        snprintf(err, errlen, "cannot start thread: %s", strerror(rc));
    }

    uint64_t end = lg->count_from_ns, last_send = lg->count_from_ns;
    struct lg_series series = {0};
    for (unsigned i = 0; i < started; i++) {
        pthread_join(ws[i].tid, NULL);
        merge(res, &ws[i]);
        if (lg_series_merge(&series, &ws[i].series) < 0)
            series.n = 0; /* out of memory: no plot rather than a wrong one */
        if (ws[i].end_ns > end)
            end = ws[i].end_ns;
        if (ws[i].end_ns > lg->start_ns) {
            double busy = (double)ws[i].cpu_ns / (double)(ws[i].end_ns - lg->start_ns);
            if (busy > res->busy)
                res->busy = busy;
        }
        if (ws[i].last_send_ns > last_send)
            last_send = ws[i].last_send_ns;
    }
    if (last_send > end)
        last_send = end;
    if (end < lg->count_from_ns) /* stopped during the warm-up */
        end = last_send = lg->count_from_ns;
    res->elapsed = (double)(end - lg->count_from_ns) / 1e9;
    res->attack = (double)(last_send - lg->count_from_ns) / 1e9;
    res->output_errno = atomic_load(&lg->output_errno);
    memcpy(res->tls_error, lg->tls_error, sizeof(res->tls_error)); /* the threads are joined */
    if (lg->tls)
        lg_tls_resumed(lg->tls, &res->tls_resumed, &res->tls_handshakes);
    res->series = series.intervals;
    res->nintervals = series.n;
    workers_free(ws, nt);
    return started < nt ? -1 : 0;
}
