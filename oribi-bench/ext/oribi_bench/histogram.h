/*
 * Latency histogram in the spirit of HdrHistogram: log-linear buckets in a
 * fixed array, so recording is O(1), memory never grows with the number of
 * samples, and two histograms merge by adding counts (one per load thread,
 * merged at the end).
 *
 * Layout: values below 2 * ORIBI_HIST_SUB (2048) get one bucket each
 * (exact). Above, each power-of-two range [2^k, 2^(k+1)) is cut into
 * ORIBI_HIST_SUB (1024) equal buckets, so a bucket is never wider than
 * 1/1024 of its lowest value. Percentiles report a bucket's midpoint:
 * relative error <= 1/2048 (~0.05%), i.e. better than 3 significant digits.
 * The trackable range is 0 .. ORIBI_HIST_MAX (2^32 - 1, ~71 minutes when the
 * unit is the microsecond); larger values are clamped into the last bucket
 * but min, max and the mean stay exact.
 */
#ifndef ORIBI_HISTOGRAM_H
#define ORIBI_HISTOGRAM_H

#include <stdint.h>

#define ORIBI_HIST_SUB_BITS 10
#define ORIBI_HIST_SUB      (1u << ORIBI_HIST_SUB_BITS) /* 1024 */
#define ORIBI_HIST_MAX_BITS 32
#define ORIBI_HIST_MAX      ((UINT64_C(1) << ORIBI_HIST_MAX_BITS) - 1)
/* 2048 exact buckets + 1024 per power of two from 2^11 to 2^31: 23552. */
#define ORIBI_HIST_BUCKETS (2 * ORIBI_HIST_SUB + (ORIBI_HIST_MAX_BITS - ORIBI_HIST_SUB_BITS - 1) * ORIBI_HIST_SUB)

struct oribi_hist {
    uint64_t count;
    uint64_t min; /* exact; UINT64_MAX while empty */
    uint64_t max; /* exact */
    double sum;   /* exact enough for the mean; a double cannot overflow */
    uint64_t counts[ORIBI_HIST_BUCKETS];
};

/* Empties h (about 184 KiB: allocate it, do not put it on a small stack). */
void oribi_hist_init(struct oribi_hist *h);

/* Adds one sample. */
void oribi_hist_record(struct oribi_hist *h, uint64_t value);

/* Adds every sample of src to dst. */
void oribi_hist_merge(struct oribi_hist *dst, const struct oribi_hist *src);

/*
 * Value at percentile p (0..100, nearest rank: the smallest recorded value
 * such that at least p% of the samples are <= it), within the precision
 * above and clamped to [min, max]. 0 when h is empty.
 */
uint64_t oribi_hist_percentile(const struct oribi_hist *h, double p);

/* Index of v's bucket (HdrHistogram's counts index for the same layout),
 * and the highest value that bucket holds. */
unsigned oribi_hist_bucket(uint64_t v);
uint64_t oribi_hist_bucket_highest(unsigned i);

/* Arithmetic mean, 0 when empty. */
double oribi_hist_mean(const struct oribi_hist *h);

#endif
