/*
 * The results stream of `oribi bench --output FILE` (docs/BENCH.md): one
 * fixed-size record per request, written by the load generator's threads as
 * the run goes, and read back by `oribi bench report`, which adds records
 * into a result exactly as the run did.
 *
 * A record is ORIBI_RESULT_SIZE bytes, little-endian:
 *   0 u64 sent_ns     intended send time, ns after the run's start (warm-up
 *                     left out): the latency's origin
 *   8 u64 latency_us  0 for a failure other than a timeout
 *  16 u64 bytes_in    response bytes read for it
 *  24 u64 bytes_out   request bytes sent for it
 *  32 u16 status      0: no response (then error is set)
 *  34 u8  error       0, or 1 + enum oribi_lg_error
 *  35 u8  err_no      the errno below ORIBI_LG_ERRNO_MAX, else 0
 *  36 u16 target      which request of the run (--targets), from 0, modulo 65536
 *  38 u8  flags       ORIBI_RESULT_RETRIED
 *  39 u8  type        ORIBI_RESULT_REQUEST; ORIBI_RESULT_SUMMARY: the run's
 *                     summary follows (latency_us: its length in bytes)
 */
#ifndef ORIBI_RESULTS_H
#define ORIBI_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include "loadgen_internal.h"

#define ORIBI_RESULT_SIZE           40
#define ORIBI_RESULT_REQUEST        1
#define ORIBI_RESULT_SUMMARY        0xff
#define ORIBI_RESULT_RETRIED        1          /* sent again after a lost keep-alive connection */
#define ORIBI_RESULTS_MAX_INTERVALS (1u << 14) /* of the series (a report asks for ~300) */

struct oribi_result {
    uint64_t sent_ns, latency_us, bytes_in, bytes_out;
    uint16_t status, target;
    uint8_t error, err_no, flags, type;
};

void oribi_result_encode(const struct oribi_result *r, unsigned char *out);

/* 0, or -1 when in is not a record the load generator writes. */
int oribi_result_decode(const unsigned char *in, struct oribi_result *r);

/* Records added up: a run's result rebuilt, and optionally the latency
 * histogram per hlog interval (for HdrHistogram's interval log). */
struct oribi_results {
    struct oribi_lg_result res; /* sent, retried and the byte, status, error and
                                   latency totals; the run's own counters
                                   (elapsed, late, ...) are the summary's */
    struct lg_series series;
    uint64_t series_ns; /* 0: no series */
    uint64_t hlog_ns;   /* 0: no interval histograms */
    uint64_t *keys;     /* hlog: interval << 32 | histogram bucket, one a sample */
    size_t nkeys, capkeys;
    uint64_t last_sent_ns, last_end_ns; /* for a stream cut short of its summary */
};

/* Zero-fills a (then sets series_ns and hlog_ns). */
void oribi_results_init(struct oribi_results *a);
void oribi_results_free(struct oribi_results *a);

/*
 * Adds the whole records in p[0..n) (a stream's bytes after its header, or
 * a piece of them; a trailing partial record is left), each sent offset_ns
 * after the earliest start of the runs merged. Returns 0 when every whole
 * record was added; 1 at a summary record (*at: its byte offset); -1 at a
 * record that is not one, or sent later than ORIBI_RESULTS_MAX_INTERVALS
 * series intervals (*at: its offset; those before it were added); -2 when
 * out of memory.
 */
int oribi_results_add(struct oribi_results *a, const unsigned char *p, size_t n, uint64_t offset_ns, size_t *at);

/*
 * HdrHistogram's V2 encoding (uncompressed: cookie 0x1c849313, a 40-byte
 * header, then ZigZag LEB128 counts with runs of zeros as negative counts)
 * of the samples keys[0..n), all of one interval and sorted. The layout of
 * our histogram is HdrHistogram's for 1 to 2^32 - 1 at 3 significant
 * digits, so a bucket index is its counts index. Returns the bytes written
 * to out (room for ORIBI_RESULT_HLOG_MAX(n) bytes), *max: the highest
 * value equivalent to the largest sample.
 */
#define ORIBI_RESULT_HLOG_MAX(n) (40 + 20 * (size_t)(n) + 20)
size_t oribi_results_hdr_v2(const uint64_t *keys, size_t n, unsigned char *out, uint64_t *max);

/* Sorts the hlog keys: intervals in order, buckets in order within each. */
void oribi_results_sort(struct oribi_results *a);

#endif
