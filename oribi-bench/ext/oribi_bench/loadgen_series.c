/*
 * Latency over time for `oribi bench --plot`: one entry per interval of the
 * run (by intended send time), each with counts, the exact mean and max,
 * and a coarse log-linear histogram (8 buckets per power of two, so a
 * percentile is within 1/16 of its value): enough to draw p50 and p99 per
 * interval in ~1 KiB an interval. Intervals grow as the run goes on; a failed
 * allocation loses samples of the plot, never of the main histogram.
 */
#include <stdlib.h>
#include <string.h>
#include "loadgen_internal.h"

static unsigned interval_bucket(uint64_t us)
{
    if (us < 8)
        return (unsigned)us;
    unsigned k = 63u - (unsigned)__builtin_clzll(us); /* 2^k <= us, k >= 3 */
    unsigned sub = (unsigned)(us >> (k - 3)) & 7u;    /* next 3 bits */
    unsigned b = (k - 2) * 8 + sub;
    return b < ORIBI_LG_INTERVAL_BUCKETS ? b : ORIBI_LG_INTERVAL_BUCKETS - 1;
}

/* Midpoint of bucket b, the inverse of interval_bucket. */
static uint64_t bucket_value(unsigned b)
{
    if (b < 8)
        return b;
    unsigned k = b / 8 + 2, sub = b % 8;
    uint64_t lo = (UINT64_C(1) << k) + ((uint64_t)sub << (k - 3));
    return lo + (UINT64_C(1) << (k - 3)) / 2;
}

static struct oribi_lg_interval *interval_at(struct lg_series *s, size_t i)
{
    if (i >= s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap <= i)
            cap *= 2;
        struct oribi_lg_interval *p = realloc(s->intervals, cap * sizeof(*p));
        if (p == NULL)
            return NULL;
        memset(p + s->cap, 0, (cap - s->cap) * sizeof(*p));
        s->intervals = p;
        s->cap = cap;
    }
    if (i >= s->n)
        s->n = i + 1;
    return &s->intervals[i];
}

void lg_series_record(struct lg_series *s, uint64_t interval_ns, uint64_t since_ns, uint64_t us, int failed)
{
    if (interval_ns == 0)
        return;
    struct oribi_lg_interval *sl = interval_at(s, since_ns / interval_ns);
    if (sl == NULL)
        return;
    if (failed)
        sl->errors++;
    else
        sl->count++;
    /* A failure's latency counts when it has one (a timeout's), as in the
     * run's histogram: a stall that ends in timeouts shows over time too. */
    if (failed && us == 0)
        return;
    sl->samples++;
    sl->sum_us += (double)us;
    if (us > sl->max_us)
        sl->max_us = us;
    sl->buckets[interval_bucket(us)]++;
}

int lg_series_merge(struct lg_series *dst, const struct lg_series *src)
{
    for (size_t i = src->n; i-- > 0;) { /* last first: one realloc */
        const struct oribi_lg_interval *a = &src->intervals[i];
        struct oribi_lg_interval *b = interval_at(dst, i);
        if (b == NULL)
            return -1;
        b->count += a->count;
        b->samples += a->samples;
        b->errors += a->errors;
        b->sum_us += a->sum_us;
        if (a->max_us > b->max_us)
            b->max_us = a->max_us;
        for (unsigned k = 0; k < ORIBI_LG_INTERVAL_BUCKETS; k++)
            b->buckets[k] += a->buckets[k];
    }
    return 0;
}

uint64_t oribi_lg_interval_percentile(const struct oribi_lg_interval *sl, double p)
{
    if (sl->samples == 0)
        return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)sl->samples + 0.9999999);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < ORIBI_LG_INTERVAL_BUCKETS; b++) {
        seen += sl->buckets[b];
        if (seen >= rank) {
            uint64_t v = bucket_value(b);
            return v > sl->max_us ? sl->max_us : v;
        }
    }
    return sl->max_us;
}
