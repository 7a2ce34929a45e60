/*
 * Load generator: the engine of `oribi bench`. Pure C (no Ruby): a closed
 * loop of N connections spread over T threads, each thread with its own
 * epoll loop and its own connections, each connection sending the same raw
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
#include <sys/types.h>
#include "histogram.h"

enum oribi_lg_error {
    ORIBI_LG_E_CONNECT, /* socket(), connect() or its asynchronous result failed */
    ORIBI_LG_E_READ,    /* read failed, or EOF before the response was complete */
    ORIBI_LG_E_WRITE,   /* send failed */
    ORIBI_LG_E_TIMEOUT, /* no complete response within the per-request timeout */
    ORIBI_LG_E_PARSE,   /* malformed response, or bytes nobody asked for */
    ORIBI_LG_E_COUNT
};

struct oribi_lg_config {
    const char *host;       /* name or IPv4/IPv6 literal ("::1" or "[::1]") */
    const char *port;       /* with host */
    const char *unix_path;  /* instead of host/port */
    const char *request;    /* raw request bytes, copied by oribi_lg_new */
    size_t request_len;
    const size_t *request_ends; /* several requests back to back in request, each
                                   ending there (nrequests, ascending), sent in
                                   turn; NULL: request is one request */
    unsigned nrequests;
    unsigned threads;       /* lowered to connections when larger */
    unsigned connections;   /* total, spread evenly over threads */
    double duration;        /* seconds; 0 = no time limit */
    uint64_t requests;      /* attempts (completed + failed); 0 = no count limit */
    int keepalive;          /* 0: close after every response */
    double timeout;         /* seconds per request, connect included */
    double rate;            /* > 0: open loop, requests/s over all threads */
    double series_interval; /* > 0: record latency over time in slots this long */
    double warmup;          /* seconds at the start whose results are not counted */
    unsigned max_connections; /* open loop: connections at most, total (0: 1000) */
};

/* One interval of the latency-over-time series (loadgen_series.c). */
#define ORIBI_LG_SLOT_BUCKETS 256 /* 8 per power of two up to 2^33 us */
struct oribi_lg_slot {
    uint64_t count, errors, max_us;
    double sum_us;
    uint32_t buckets[ORIBI_LG_SLOT_BUCKETS];
};

/* Latency at percentile p of a slot, within 1/16. */
uint64_t oribi_lg_slot_percentile(const struct oribi_lg_slot *sl, double p);

struct oribi_lg_result {
    uint64_t requests;                     /* completed responses */
    uint64_t errors[ORIBI_LG_E_COUNT];
    uint64_t status[600];                  /* completed responses by status code */
    uint64_t bytes_in, bytes_out;
    double elapsed;                        /* seconds */
    double attack;                         /* seconds from start to the last send */
    uint64_t late;                         /* open loop: sends > 1 ms behind schedule */
    uint64_t dropped;                      /* open loop: scheduled sends never made */
    struct oribi_lg_slot *series;          /* series_interval: malloc'd, caller frees */
    size_t nslots;
    struct oribi_hist latency;             /* microseconds */
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
 * In-flight requests when time is up are neither completed nor errors.
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

/* ---- HTTP/1.x response framing (loadgen_http.c), pure functions ---- */

#define ORIBI_LG_ERROR      (-1)
#define ORIBI_LG_INCOMPLETE (-2)

struct oribi_lg_response {
    int status;             /* 100..599 */
    int minor_version;      /* 0 or 1 */
    int64_t content_length; /* -1 when absent or overridden by Transfer-Encoding */
    int chunked;            /* Transfer-Encoding ends with chunked */
    int until_close;        /* Transfer-Encoding without final chunked: body ends at EOF */
    int close;              /* the server will close after this response */
};

/*
 * Parses a response head at the start of buf[0..len). Returns the length of
 * the head (through the empty line), ORIBI_LG_INCOMPLETE, or ORIBI_LG_ERROR
 * (also as soon as the first bytes cannot start a status line). Strict:
 * CRLF line ends only, no obs-fold, Content-Length all digits and < 10^18.
 */
int oribi_lg_parse_response(const char *buf, size_t len, struct oribi_lg_response *r);

/* Bytes of chunk extensions plus trailer fields tolerated in one body. */
#define ORIBI_LG_CHUNK_META_MAX 65536

/* Skips a chunked body as it arrives; zero-fill before the first call. */
struct oribi_lg_chunked {
    uint64_t _left;   /* data bytes left in the current chunk */
    size_t _meta;     /* extension and trailer bytes so far */
    unsigned _digits; /* hex digits of the current size line */
    int _state;
};

/*
 * Consumes buf[0..len) of a chunked body. Returns the number of bytes up to
 * and including the body's final CRLF when it ends in buf,
 * ORIBI_LG_INCOMPLETE when all of buf was consumed and more is needed, or
 * ORIBI_LG_ERROR.
 */
ssize_t oribi_lg_skip_chunked(struct oribi_lg_chunked *d, const char *buf, size_t len);

#endif
