/* Log-linear latency histogram: see histogram.h for the layout and precision. */
#include <math.h>
#include <string.h>
#include "histogram.h"

/*
 * Bucket of v. With shift = how far v must move right to fit in 11 bits,
 * v >> shift is in [1024, 2047] (or v itself when shift is 0), and
 * (shift << 10) + (v >> shift) numbers the buckets densely from 0.
 */
unsigned oribi_hist_bucket(uint64_t v)
{
    if (v > ORIBI_HIST_MAX)
        v = ORIBI_HIST_MAX;
    if (v < 2 * ORIBI_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - ORIBI_HIST_SUB_BITS;
    return (shift << ORIBI_HIST_SUB_BITS) + (unsigned)(v >> shift);
}

/* Representative value of bucket i: the middle of the values it holds. */
static uint64_t bucket_value(unsigned i)
{
    unsigned q = i >> ORIBI_HIST_SUB_BITS;
    if (q < 2)
        return i;
    unsigned shift = q - 1;
    uint64_t low = (uint64_t)(ORIBI_HIST_SUB + (i & (ORIBI_HIST_SUB - 1))) << shift;
    uint64_t width = UINT64_C(1) << shift;
    return low + (width - 1) / 2;
}

uint64_t oribi_hist_bucket_highest(unsigned i)
{
    unsigned q = i >> ORIBI_HIST_SUB_BITS;
    if (q < 2)
        return i;
    unsigned shift = q - 1;
    return ((uint64_t)(ORIBI_HIST_SUB + (i & (ORIBI_HIST_SUB - 1))) << shift) + (UINT64_C(1) << shift) - 1;
}

void oribi_hist_init(struct oribi_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void oribi_hist_record(struct oribi_hist *h, uint64_t value)
{
    h->counts[oribi_hist_bucket(value)]++;
    h->count++;
    h->sum += (double)value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
}

void oribi_hist_merge(struct oribi_hist *dst, const struct oribi_hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < ORIBI_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t oribi_hist_percentile(const struct oribi_hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (!(p > 0))
        return h->min;
    if (p >= 100)
        return h->max;
    /* Nearest rank. The tiny downward nudge keeps 99.9% of 1000 at rank 999
     * although 99.9 has no exact binary form and the product lands a hair
     * above 999. */
    double r = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)ceil(r - r * 1e-12);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;

    uint64_t seen = 0;
    for (unsigned i = 0; i < ORIBI_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = bucket_value(i);
            if (v < h->min)
                return h->min;
            if (v > h->max)
                return h->max;
            return v;
        }
    }
    return h->max; /* unreachable while counts add up to count */
}

double oribi_hist_mean(const struct oribi_hist *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}
