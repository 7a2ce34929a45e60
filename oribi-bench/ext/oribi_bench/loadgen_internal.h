/*
 * Private to the load generator's parts: loadgen.c sets a run up, starts
 * the threads and merges their results; loadgen_conn.c is what each thread
 * runs, its connections, its event loop and, in the open loop, its
 * schedule; loadgen_series.c keeps latency over time for the plot.
 */
#ifndef ORIBI_LOADGEN_INTERNAL_H
#define ORIBI_LOADGEN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include "loadgen.h"
#include "os/wakeup.h"
#include "loadgen_tls.h"

struct oribi_lg {
    char *host, *port, *unix_path, *request;
    size_t request_len;
    unsigned threads, connections;
    uint64_t requests, duration_ns, timeout_ns;
    int keepalive;
    struct lg_req {
        const char *p;
        size_t len;
        int is_head;
        int idempotent; /* may be sent again after a lost connection */
    } * reqs;           /* into request */
    unsigned nreqs;
    uint64_t interval_ns; /* open loop: per thread between sends; 0: closed loop */
    struct lg_stage {
        double from, to;     /* requests per second, over all threads */
        uint64_t start, end; /* ns from count_from_ns */
    } * stages;              /* open loop in stages; NULL: at interval_ns */
    unsigned nstages;
    uint64_t series_ns; /* series interval; 0: no series */
    uint64_t warmup_ns; /* results count from start + warmup */
    uint64_t count_from_ns;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct oribi_wakeup stop_wake; /* readable once stopped: wakes every loop */
    atomic_int stop;
    atomic_uint_fast64_t claimed;
    uint64_t start_ns, deadline_ns; /* deadline 0: none */
    struct lg_progress *progress;   /* one per thread, for oribi_lg_progress */
    int output_fd;                  /* > 0: results stream */
    pthread_mutex_t output_lock;    /* whole buffers of records, one thread at a time */
    atomic_int output_errno;
    struct lg_tls *tls;    /* https; NULL: plain */
    atomic_int tls_failed; /* set by the first handshake to fail */
    char tls_error[160];   /* its reason, written once by that thread */
};

/* Counters a thread publishes for readers on other threads; a cache line
 * each so publishing does not slow a neighbour down. */
struct lg_progress {
    atomic_uint_fast64_t done, failed;
    char _pad[64 - 2 * sizeof(atomic_uint_fast64_t)];
};

struct lg_conn; /* loadgen_conn.c */

struct lg_series {
    struct oribi_lg_interval *intervals;
    size_t n, cap;
};

/* Adds a response (or a failure) sent since_ns into the run. */
void lg_series_record(struct lg_series *s, uint64_t interval_ns, uint64_t since_ns, uint64_t us, int failed);
/* Adds src's intervals into dst's: -1 when out of memory. */
int lg_series_merge(struct lg_series *dst, const struct lg_series *src);

/* One thread: its connections, its poller and its own statistics, so
 * the hot path shares no cache line and takes no lock. */
struct lg_worker {
    struct oribi_lg *lg;
    pthread_t tid;
    unsigned index;    /* into lg->progress */
    unsigned next_req; /* into lg->reqs, taken in turn */
    int pfd;           /* its poller (os/poller.h) */
    struct lg_conn *conns;
    unsigned nconns, live; /* live: connections not done */
    struct lg_conn *ready; /* to (re)start from the loop, not from deep calls */
    char *rbuf;
    uint64_t end_ns, last_send_ns;
    uint64_t cpu_ns;      /* this thread's CPU time over the run */
    uint64_t next_due;    /* open loop: intended time of the next send */
    struct lg_conn *idle; /* open loop: connections free to send, open ones on top */
    int exhausted;        /* open loop: the request count is used up */
    uint64_t late, dropped, behind, sent, retried;
    uint64_t requests, errors[ORIBI_LG_E_COUNT], bytes_in, bytes_out;
    uint64_t causes[ORIBI_LG_E_COUNT][ORIBI_LG_ERRNO_MAX];
    uint64_t status[600];
    struct oribi_hist *hist;
    struct lg_series series;
    unsigned char *obuf; /* results stream: records not yet written */
    size_t olen;
};

static inline uint64_t lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Open loop: when the send after the one due at `due` is due, for a
 * thread that takes one in every `threads` of the schedule. */
uint64_t lg_next_due(const struct oribi_lg *lg, uint64_t due);
/* Stages: when `need` more sends (over all threads) are due after `due`;
 * UINT64_MAX past the last stage. */
uint64_t lg_advance(const struct oribi_lg *lg, uint64_t due, double need);

/* Allocates w's connections and buffers; -1 with errno on failure (then
 * lg_worker_free still applies). */
int lg_worker_init(struct oribi_lg *lg, struct lg_worker *w, unsigned nconns);
void lg_worker_free(struct lg_worker *w);

/* pthread entry: runs w's connections until time, count or stop. */
void *lg_worker_main(void *w);

#endif
