/*
 * Load generator: the engine of `oribi bench`. Pure C (no Ruby): a closed
 * loop of N connections spread over T threads, each thread with its own
 * event loop and its own connections, each connection sending the same raw
 * request and waiting for the whole response before the next one.
 *
 * Latency of a request runs from the moment it is started (before connect()
 * when it needs a new connection, so connect time is included) to the
 * moment the last byte of its response is parsed.
 *
 * Open loop (rate > 0): each thread sends on its own schedule, rate/threads
 * requests per second, on whichever of its connections is idle (opened on
 * demand, up to max_connections in all). Latency then runs from the
 * intended send time, so a stalled server shows in the percentiles instead
 * of just slowing the sender down (coordinated omission). Sends more than
 * 1 ms behind schedule are counted late; those never made, dropped.
 */
#ifndef ORIBI_LOADGEN_H
#define ORIBI_LOADGEN_H

#include <stddef.h>
#include <stdint.h>
#include "histogram.h"

enum oribi_lg_error {
    ORIBI_LG_E_CONNECT, /* socket(), connect() or its asynchronous result failed */
    ORIBI_LG_E_READ,    /* read failed, or EOF before the response was complete */
    ORIBI_LG_E_WRITE,   /* send failed */
    ORIBI_LG_E_TIMEOUT, /* no complete response within the per-request timeout */
    ORIBI_LG_E_PARSE,   /* malformed response, or bytes nobody asked for */
    ORIBI_LG_E_TLS,     /* TLS handshake failed (the certificate, most often) */
    ORIBI_LG_E_COUNT
};

/* Errors are also counted by errno below this; 0: none (EOF, timeout,
 * parse) or an errno beyond. */
#define ORIBI_LG_ERRNO_MAX 160

/* Open loop in stages: from `from` to `to` requests per second, linearly,
 * over `seconds` (from == to: a constant rate). */
struct oribi_lg_stage {
    double from, to, seconds;
};
#define ORIBI_LG_STAGES_MAX 1000

struct oribi_lg_config {
    const char *host;      /* name or IPv4/IPv6 literal ("::1" or "[::1]") */
    const char *port;      /* with host */
    const char *unix_path; /* instead of host/port */
    const char *request;   /* raw request bytes, copied by oribi_lg_new */
    size_t request_len;
    const size_t *request_ends; /* several requests back to back in request, each
                                   ending there (nrequests, ascending), sent in
                                   turn; NULL: request is one request */
    unsigned nrequests;
    unsigned threads;                    /* lowered to connections when larger */
    unsigned connections;                /* total, spread evenly over threads */
    double duration;                     /* seconds; 0 = no time limit */
    uint64_t requests;                   /* attempts (completed + failed); 0 = no count limit */
    int keepalive;                       /* 0: close after every response */
    double timeout;                      /* seconds per request, connect included */
    double rate;                         /* > 0: open loop, requests/s over all threads */
    double series_interval;              /* > 0: record latency over time in intervals this long */
    double warmup;                       /* seconds at the start whose results are not counted */
    unsigned max_connections;            /* open loop: connections at most, total (>= 1) */
    const struct oribi_lg_stage *stages; /* open loop in stages (rate: their highest,
                                            duration: their sum), copied; NULL: none */
    unsigned nstages;
    int tls;                 /* https: TLS over the connection */
    const char *server_name; /* tls: SNI and the certificate's name (NULL: none) */
    int insecure;            /* tls: do not check the certificate */
    int tls_resume;          /* tls: resume the last session the server gave on each new connection */
    int output_fd;           /* > 0: a record of every request counted is written there
                      as the run goes (results.h); the caller opens and closes it */
};

/* One interval of the latency-over-time series (loadgen_series.c). */
#define ORIBI_LG_INTERVAL_BUCKETS 256 /* 8 per power of two up to 2^33 us */
struct oribi_lg_interval {
    uint64_t count, errors; /* responses, failures */
    uint64_t samples;       /* latencies below: responses and timeouts (as the histogram) */
    uint64_t max_us;
    double sum_us;
    uint32_t buckets[ORIBI_LG_INTERVAL_BUCKETS];
};

/* Latency at percentile p of an interval's samples, within 1/16. */
uint64_t oribi_lg_interval_percentile(const struct oribi_lg_interval *sl, double p);

struct oribi_lg_result {
    uint64_t requests; /* completed responses */
    uint64_t errors[ORIBI_LG_E_COUNT];
    uint64_t causes[ORIBI_LG_E_COUNT][ORIBI_LG_ERRNO_MAX]; /* errors by errno */
    uint64_t status[600];                                  /* completed responses by status code */
    uint64_t bytes_in, bytes_out;
    double elapsed;          /* seconds */
    double attack;           /* seconds from start to the last send */
    uint64_t late;           /* open loop: sends > 1 ms behind schedule */
    uint64_t dropped;        /* open loop: scheduled sends never made */
    uint64_t behind;         /* open loop: late sends that had a connection free:
                                         the generator, not the server, was slow */
    uint64_t sent;           /* requests started (completed + failed) */
    double busy;             /* CPU over wall time of the busiest thread: near 1,
                                         the generator was the bottleneck */
    uint64_t retried;        /* sent again after a lost keep-alive connection */
    uint64_t start_unix_ns;  /* wall clock when counting began */
    int output_errno;        /* output_fd: the first write error, else 0 */
    char tls_error[160];     /* why the first TLS handshake failed, else "" */
    uint64_t tls_handshakes; /* tls_resume: handshakes done, and those that resumed */
    uint64_t tls_resumed;
    struct oribi_lg_interval *series; /* series_interval: malloc'd, caller frees */
    size_t nintervals;
    struct oribi_hist latency; /* microseconds */
};

struct oribi_lg;

/*
 * Copies cfg (strings included) and prepares the stop signal. Returns NULL
 * with a message in err on a bad configuration or a failed allocation.
 */
struct oribi_lg *oribi_lg_new(const struct oribi_lg_config *cfg, char *err, size_t errlen);

/*
 * Resolves the address, runs the load and fills *res (allocated by the
 * caller: it holds a histogram). Blocks until the duration or request
 * count is reached or oribi_lg_stop() is called. Returns 0, or -1 with a
 * message in err when the run could not start (name resolution, threads).
 * Requests in flight when time is up are awaited, each within its timeout,
 * and counted.
 */
int oribi_lg_run(struct oribi_lg *lg, struct oribi_lg_result *res, char *err, size_t errlen);

/* Makes a running oribi_lg_run() return promptly. Safe from any thread. */
void oribi_lg_stop(struct oribi_lg *lg);

void oribi_lg_free(struct oribi_lg *lg);

/*
 * Progress of a running oribi_lg_run(), safe from any thread: responses
 * completed and requests failed so far, as published by the threads every
 * 10 ms or so. Both 0 before the run starts.
 */
void oribi_lg_progress(const struct oribi_lg *lg, uint64_t *done, uint64_t *failed);

#endif
