/*
 * One client connection as the worker's C loop sees it: its input buffer
 * (head, body and any pipelined bytes after them), the parsed request, the
 * body being read, unsent output, and its place in the timer lists.
 */
#ifndef ORIBI_CONN_H
#define ORIBI_CONN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "http/chunked.h"
#include "http/parser.h"
#include "loop/tls.h"

enum oribi_conn_state {
    CONN_HEAD,   /* reading a request head; idle between requests when len == 0 */
    CONN_BODY,   /* reading the body */
    CONN_READY,  /* complete request queued for the app */
    CONN_APP,    /* the app has it */
    CONN_FLUSH,  /* response bytes left to write before the next request */
    CONN_LINGER, /* write side shut after an error: discarding input before close */
    CONN_CLOSED, /* on the free list */
};

/* Bytes kept in the write buffers of all a worker's conns, and the cap
 * past which the loop drops the clients that read none of theirs
 * (max_write_backlog); likewise the bytes of responses spooled to tmpfiles
 * and not sent yet (max_worker_spool), by app threads and in files handed
 * to conns. App threads and the loop both count: atomics. */
struct oribi_write_budget {
    size_t kept;
    size_t cap;
    size_t spooled;
    size_t spool_cap;
};

/* Header fields a connection keeps in itself (oribi_conn.fields). */
#define ORIBI_CONN_FIELDS 16

enum oribi_timer_kind { TIMER_NONE, TIMER_IDLE, TIMER_HEAD, TIMER_BODY, TIMER_WRITE, TIMER_LINGER, TIMER_KINDS };

struct ssl_st;

struct oribi_conn {
    int fd;
    struct ssl_st *tls;         /* TLS over the socket (tls.h), else NULL: the socket itself */
    unsigned char plain_on_tls; /* its TLS failed on a plain HTTP request (tls.h) */
    struct oribi_tls_io tio;    /* what TLS reads and writes through (tls.h) */
    int listener;               /* index into the loop's listeners */
    uint32_t gen;               /* bumped on reuse: stale pending entries are skipped */
    unsigned char state;
    unsigned char timer;    /* which list it is on */
    unsigned watched : 1;   /* in the poller */
    unsigned keepalive : 1; /* may carry another request after this one (keepalive_decide) */
    unsigned char proxy;    /* PROXY header versions awaited (its listener's, ORIBI_PROXY_V*), 0 once read */
    /* Not bit fields: the loop's thread writes these while an app thread
     * writes the others (threads > 1). */
    unsigned char may_read; /* the last read filled the buffer, or an edge came in since */
    uint32_t app_events;    /* poller events that came while the app had the conn */
    unsigned char peer_hup; /* ORIBI_POLL_HUP/ERR seen: read on until EOF, no edge will come again */
    unsigned char kept;     /* kept alive after a response: counted in the loop's nkept */
    /* Pipelining: its next request was in the buffer when this one was
     * handed out, so the response may wait in wbuf to leave with the next
     * ones' (oribi_conn_write_last). The app's thread reads it. */
    unsigned char cork;
    unsigned char corked; /* holds such a response, on the loop's corked list (loop thread only) */
    int64_t piped_us;     /* when a pipelined request was handed out (µs), else 0: the app's time */

    char *buf;
    size_t len, cap;
    size_t last_len; /* parser resume point */
    size_t head_len; /* bytes of the request head */
    size_t rest_off; /* where the bytes after this request start (READY) */

    struct oribi_request req;
    /* The fields of its parsed head: in fields[] when that many fit (most
     * requests), else allocated for this request alone. The parser writes
     * into the loop's array of max_headers; a connection that waits (kept
     * alive, or in a fiber that waits on an upstream) does not keep one. */
    struct oribi_header *headers;

    /* body */
    int64_t body_left;  /* Content-Length bytes still to come */
    size_t body_mem;    /* decoded body bytes held at buf + head_len */
    int64_t body_total; /* decoded body bytes so far (memory + file) */
    int64_t body_mark;  /* body_total when the body timer was last re-armed */
    int64_t body_start; /* when the body began (ms), for min_body_rate */
    int body_fd;        /* tmpfile once the body outgrew memory, else -1 */
    struct oribi_chunked_decoder dec;

    /* output the socket did not take yet */
    char *wbuf;
    size_t wlen, woff, wcap;
    struct oribi_write_budget *budget; /* the worker's count of kept bytes */
    int64_t wprogress_ms;              /* when the socket last took bytes (or the kept ones began) */
    /* a file the loop sends after wbuf (a to_path body or a spooled
     * response handed over by the app thread), else file_fd -1 */
    int file_fd;
    int64_t file_off, file_end;
    int file_spooled; /* file_fd is a spool: what is left counts in budget->spooled */

    unsigned requests; /* served on this connection */
    int64_t seen_us;   /* when the worker first saw the current request (queue_time.h), 0 not yet */
    int64_t deadline;  /* ms, monotonic */
    int64_t ready_at;  /* µs: when it joined the ready queue (the scheduler orders by it) */
    struct oribi_conn *tprev, *tnext;
    struct oribi_conn *qnext; /* ready queue, free list */

    /* The client: the socket's peer, or the address a PROXY header gave
     * (REMOTE_ADDR, trusted_proxies, the loop's log lines). */
    struct sockaddr_storage peer;
    socklen_t peer_len;

    /* Last: 512 bytes that only parsing and the env read, after the
     * fields the loop touches on every event. */
    struct oribi_header fields[ORIBI_CONN_FIELDS];
};

/* The connection closes once the current response is out (an error, a
 * response whose framing is lost or that the close ends, a stop): the one
 * way keepalive is lowered after keepalive_decide (loop/internal.h). */
static inline void oribi_conn_no_keepalive(struct oribi_conn *c)
{
    c->keepalive = 0;
}

#endif
