/*
 * One worker's row of the scoreboard (ruby/scoreboard.c): a few words of
 * shared memory the worker's engine writes with plain stores on its hot
 * path, and the master reads for request_timeout, worker_timeout and for
 * stats. Each field
 * has one writer (the worker) and is read without locks: the master may
 * see a request counted in `served` a moment before `busy_since_ms` is
 * cleared, which stats can live with.
 */
#ifndef ORIBI_SCORE_H
#define ORIBI_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "http/queue_time.h"

#define ORIBI_SCORE_REQUEST 120

struct oribi_score {
    volatile int64_t busy_since_ms; /* CLOCK_MONOTONIC ms; 0 when idle */
    volatile uint64_t served;       /* responses finished */
    volatile int32_t pid;
    volatile uint32_t conns;                      /* open connections of the worker's loop */
    volatile uint32_t idle;                       /* of which idle keep-alive ones (waiting for a next request) */
    volatile uint32_t generation;                 /* which fork generation the worker is (refork) */
    volatile int64_t last_request_ms;             /* wall clock (ms since the epoch) of the last request taken */
    volatile uint64_t queue[ORIBI_QUEUE_BUCKETS]; /* queue time histogram (not cumulative) */
    volatile uint64_t queue_sum_us;
    volatile uint64_t queue_header;         /* requests whose queue time came from X-Request-Start */
    volatile uint64_t queue_header_refused; /* X-Request-Start from a trusted peer, implausible */
    char request[ORIBI_SCORE_REQUEST];      /* "GET /path" being served, no query, cut to fit */
    /* CLOCK_MONOTONIC ms of the worker's last check-in (worker_timeout), 0
     * before the first: written by a thread of its own, whatever its
     * requests do, so that only a hung process falls silent. */
    volatile int64_t checked_in_ms;
    uint64_t dropped_headers;   /* atomic (the app threads add): response fields the SPEC forbids, not sent */
    volatile uint32_t io_bound; /* requests in the app marked as waiting on IO (io_threads), under the GVL */
    volatile uint32_t in_app;   /* requests in the app now (threads busy, or fibers running), under the GVL */
    volatile uint32_t streams;  /* responses carried on beyond the pool (max_streams), under the GVL */
    uint64_t streams_held;      /* under the GVL: streams that held their app thread, max_streams reached */
    /* Atomic, what this worker counts in the head (below), which the
     * master takes back when it is gone (Scoreboard#release). */
    uint32_t attached; /* 1: counted among the head's workers */
    uint32_t waiting;  /* 1: counted among the head's waiting */
    uint32_t counted;  /* its connections counted in the head's conns */
};

/* What the workers share besides their rows, at the scoreboard's head:
 * what decides which worker takes a new connection (loop/accept.c). A
 * worker updates its own part of each count and notes it in its row, so
 * that the master can undo the part of one that died. Atomics. */
struct oribi_score_head {
    uint32_t workers; /* engines attached to a row: the workers taking connections */
    uint32_t conns;   /* their open connections */
    uint32_t waiting; /* of those workers, the ones asleep in the poller with their listeners on */
};

/* The engine's worker counts itself in (row and head). */
void oribi_score_attach(struct oribi_score *s, struct oribi_score_head *h);

/* Its connections went up (1) or down (-1) by one. */
static inline void oribi_score_conns(struct oribi_score *s, struct oribi_score_head *h, int d)
{
    __atomic_store_n(&s->counted, s->counted + (uint32_t)d, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->conns, (uint32_t)d, __ATOMIC_RELAXED);
}

/* The worker is gone: what it counted in the head, taken back (the master,
 * once it reaped it). */
void oribi_score_release(struct oribi_score *s, struct oribi_score_head *h);

/* A request goes to the app: wall_ms is the wall clock, queue_us its queue
 * time (< 0: unknown), from_header 1 when it came from X-Request-Start,
 * -1 when that header was refused. No allocation, no system call. */
void oribi_score_take(struct oribi_score *s, int64_t wall_ms, int64_t queue_us, int from_header);

/* The worker is busy with this request since since_ms (CLOCK_MONOTONIC):
 * with threads, the oldest request in the app (request_timeout). */
void oribi_score_busy(struct oribi_score *s, const char *method, size_t method_len, const char *path, size_t path_len,
                      int64_t since_ms);

/* No request in the app any more. */
static inline void oribi_score_idle(struct oribi_score *s)
{
    __atomic_store_n(&s->busy_since_ms, 0, __ATOMIC_RELEASE);
}

/* A response is over. */
static inline void oribi_score_done(struct oribi_score *s)
{
    s->served++;
}

#endif
