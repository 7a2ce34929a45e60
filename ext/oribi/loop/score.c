/* A worker's scoreboard row, written by its engine (score.h). */
#include "loop/score.h"

#include <string.h>

void oribi_score_take(struct oribi_score *s, int64_t wall_ms, int64_t queue_us, int from_header)
{
    s->last_request_ms = wall_ms;
    if (from_header < 0)
        s->queue_header_refused++;
    if (queue_us >= 0) {
        s->queue[oribi_queue_bucket(queue_us)]++;
        s->queue_sum_us += (uint64_t)queue_us;
        s->queue_header += from_header > 0;
    }
}

void oribi_score_busy(struct oribi_score *s, const char *method, size_t method_len, const char *path, size_t path_len,
                      int64_t since_ms)
{
    size_t n = method_len < ORIBI_SCORE_REQUEST - 2 ? method_len : ORIBI_SCORE_REQUEST - 2;
    memcpy(s->request, method, n);
    s->request[n++] = ' ';
    /* The row is shown by /stats and the stuck-worker log line: a query
     * string may carry a token or personal data, so it is never recorded. */
    const char *query = memchr(path, '?', path_len);
    if (query)
        path_len = (size_t)(query - path);
    if (path_len > ORIBI_SCORE_REQUEST - 1 - n)
        path_len = ORIBI_SCORE_REQUEST - 1 - n;
    memcpy(s->request + n, path, path_len);
    s->request[n + path_len] = 0;
    __atomic_store_n(&s->busy_since_ms, since_ms, __ATOMIC_RELEASE);
}

void oribi_score_attach(struct oribi_score *s, struct oribi_score_head *h)
{
    /* The row first, so that a release never takes back more than was
     * counted; the other way, it would take back one the worker never
     * added. */
    __atomic_store_n(&s->attached, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->workers, 1, __ATOMIC_RELAXED);
}

void oribi_score_release(struct oribi_score *s, struct oribi_score_head *h)
{
    if (__atomic_exchange_n(&s->attached, 0, __ATOMIC_RELAXED))
        __atomic_sub_fetch(&h->workers, 1, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&s->waiting, 0, __ATOMIC_RELAXED))
        __atomic_sub_fetch(&h->waiting, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&h->conns, __atomic_exchange_n(&s->counted, 0, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}
