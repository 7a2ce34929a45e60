/*
 * libFuzzer target: records of `oribi bench --output` files, read back by
 * `oribi bench report` (oribi-bench/ext/oribi_bench/results.c). Any bytes are added up
 * (invalid records and summaries skipped over), then every interval's
 * HdrHistogram V2 encoding is built and decoded again: its counts must sum
 * to the interval's samples and fit the bound the caller allocates.
 */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "results.h"

/* Sums the ZigZag LEB128 counts of a V2 payload (runs of zeros skipped). */
static uint64_t v2_total(const unsigned char *p, size_t n)
{
    uint64_t total = 0;
    size_t i = 0;
    while (i < n) {
        uint64_t z = 0;
        for (int shift = 0; i < n; shift += 7) {
            unsigned char b = p[i++];
            z |= (uint64_t)(shift == 56 ? b : (b & 0x7f)) << shift;
            if (shift == 56 || b < 0x80)
                break;
        }
        int64_t v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        if (v > 0)
            total += (uint64_t)v;
    }
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct oribi_results *a = malloc(sizeof(*a));
    CHECK(a != NULL);
    oribi_results_init(a);
    a->series_ns = 1000000;  /* 1 ms: many intervals from small send times */
    a->hlog_ns = 1000000000; /* 1 s */
    size_t off = 0, at = 0;
    while (size - off >= ORIBI_RESULT_SIZE) {
        int rc = oribi_results_add(a, data + off, size - off, (uint64_t)size, &at);
        CHECK(rc >= -2 && rc <= 1 && at <= size - off);
        if (rc == 0)
            break;
        CHECK(rc != -2);
        off += at + ORIBI_RESULT_SIZE; /* past the summary or the bad record */
    }
    uint64_t samples = 0;
    for (unsigned i = 0; i < ORIBI_HIST_BUCKETS; i++)
        samples += a->res.latency.counts[i];
    CHECK(samples == a->res.latency.count && a->nkeys == samples);
    oribi_results_sort(a);
    for (size_t i = 0; i < a->nkeys;) {
        size_t j = i;
        while (j < a->nkeys && a->keys[j] >> 32 == a->keys[i] >> 32)
            j++;
        unsigned char *buf = malloc(ORIBI_RESULT_HLOG_MAX(j - i));
        CHECK(buf != NULL);
        uint64_t max;
        size_t len = oribi_results_hdr_v2(a->keys + i, j - i, buf, &max);
        CHECK(len <= ORIBI_RESULT_HLOG_MAX(j - i) && len >= 40);
        CHECK(v2_total(buf + 40, len - 40) == j - i);
        free(buf);
        i = j;
    }
    oribi_results_free(a);
    free(a);
    return 0;
}
