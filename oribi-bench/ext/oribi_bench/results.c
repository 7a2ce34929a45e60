/* The results stream's records and their sum: see results.h. */
#include <stdlib.h>
#include <string.h>
#include "results.h"

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

void oribi_result_encode(const struct oribi_result *r, unsigned char *out)
{
    put_le(out, r->sent_ns, 8);
    put_le(out + 8, r->latency_us, 8);
    put_le(out + 16, r->bytes_in, 8);
    put_le(out + 24, r->bytes_out, 8);
    put_le(out + 32, r->status, 2);
    out[34] = r->error;
    out[35] = r->err_no;
    put_le(out + 36, r->target, 2);
    out[38] = r->flags;
    out[39] = r->type;
}

int oribi_result_decode(const unsigned char *in, struct oribi_result *r)
{
    r->sent_ns = get_le(in, 8);
    r->latency_us = get_le(in + 8, 8);
    r->bytes_in = get_le(in + 16, 8);
    r->bytes_out = get_le(in + 24, 8);
    r->status = (uint16_t)get_le(in + 32, 2);
    r->error = in[34];
    r->err_no = in[35];
    r->target = (uint16_t)get_le(in + 36, 2);
    r->flags = in[38];
    r->type = in[39];
    if (r->type == ORIBI_RESULT_SUMMARY)
        return 0;
    /* A response has a final status and no error; a failure, the reverse. */
    int answered = r->status >= 200 && r->status < 600;
    if (r->type != ORIBI_RESULT_REQUEST || r->error > ORIBI_LG_E_COUNT || r->err_no >= ORIBI_LG_ERRNO_MAX ||
        (r->flags & ~ORIBI_RESULT_RETRIED) || answered == (r->error != 0) || (!answered && r->status != 0))
        return -1;
    return 0;
}

void oribi_results_init(struct oribi_results *a)
{
    memset(a, 0, sizeof(*a));
    oribi_hist_init(&a->res.latency);
}

void oribi_results_free(struct oribi_results *a)
{
    free(a->series.intervals);
    free(a->keys);
    a->series.intervals = NULL;
    a->keys = NULL;
}

static int keep_key(struct oribi_results *a, uint64_t since, uint64_t us)
{
    if (a->nkeys == a->capkeys) {
        size_t cap = a->capkeys ? a->capkeys * 2 : 4096;
        uint64_t *k = realloc(a->keys, cap * sizeof(*k));
        if (k == NULL)
            return -1;
        a->keys = k;
        a->capkeys = cap;
    }
    uint64_t interval = since / a->hlog_ns;
    if (interval > UINT32_MAX)
        interval = UINT32_MAX;
    a->keys[a->nkeys++] = interval << 32 | oribi_hist_bucket(us);
    return 0;
}

/* One request into the sums, as loadgen_conn.c counts it live. */
static int add_one(struct oribi_results *a, const struct oribi_result *r, uint64_t offset_ns)
{
    struct oribi_lg_result *res = &a->res;
    uint64_t since = offset_ns + r->sent_ns, us = r->latency_us;
    int failed = r->error != 0;
    if (!failed) {
        res->requests++;
        res->status[r->status]++;
    } else {
        res->errors[r->error - 1]++;
        res->causes[r->error - 1][r->err_no]++;
    }
    /* A failure's latency is kept when it has one: a timeout's. */
    if (!failed || us) {
        oribi_hist_record(&res->latency, us);
        if (a->hlog_ns && keep_key(a, since, us) < 0)
            return -1;
    }
    lg_series_record(&a->series, a->series_ns, since, us, failed); /* out of memory: a plot short of it */
    res->bytes_in += r->bytes_in;
    res->bytes_out += r->bytes_out;
    res->sent++;
    res->retried += r->flags & ORIBI_RESULT_RETRIED;
    if (since > a->last_sent_ns)
        a->last_sent_ns = since;
    if (since + us * 1000 > a->last_end_ns)
        a->last_end_ns = since + us * 1000;
    return 0;
}

int oribi_results_add(struct oribi_results *a, const unsigned char *p, size_t n, uint64_t offset_ns, size_t *at)
{
    for (size_t off = 0; n - off >= ORIBI_RESULT_SIZE; off += ORIBI_RESULT_SIZE) {
        struct oribi_result r;
        *at = off;
        if (oribi_result_decode(p + off, &r) < 0)
            return -1;
        if (r.type == ORIBI_RESULT_SUMMARY)
            return 1;
        /* Intervals grow to the latest send: a send time no run makes
         * would ask for memory without end. */
        if (a->series_ns && (offset_ns + r.sent_ns) / a->series_ns >= ORIBI_RESULTS_MAX_INTERVALS)
            return -1;
        if (add_one(a, &r, offset_ns) < 0)
            return -2;
    }
    return 0;
}

static int cmp_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

void oribi_results_sort(struct oribi_results *a)
{
    if (a->nkeys > 1)
        qsort(a->keys, a->nkeys, sizeof(*a->keys), cmp_key);
}

/* ZigZag LEB128 of v (HdrHistogram's 64-bit, at most 9 bytes). */
static size_t zigzag(unsigned char *out, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (z >= 0x80 && n < 8) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z; /* the ninth byte, if any, holds 8 bits */
    return n;
}

static void put_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
}

size_t oribi_results_hdr_v2(const uint64_t *keys, size_t n, unsigned char *out, uint64_t *max)
{
    size_t len = 40;
    unsigned next = 0; /* counts index the payload has reached */
    unsigned top = 0;
    for (size_t i = 0; i < n;) {
        unsigned bucket = (unsigned)(keys[i] & 0xffffffffu);
        int64_t count = 0;
        for (; i < n && (unsigned)(keys[i] & 0xffffffffu) == bucket; i++)
            count++;
        if (bucket > next + 1)
            len += zigzag(out + len, -(int64_t)(bucket - next)); /* a run of zeros */
        else if (bucket == next + 1)
            len += zigzag(out + len, 0); /* one zero is written as a count */
        len += zigzag(out + len, count);
        next = bucket + 1;
        top = bucket;
    }
    *max = n ? oribi_hist_bucket_highest(top) : 0;
    put_be(out, 0x1c849313, 4);              /* V2 encoding cookie, LEB128 words */
    put_be(out + 4, len - 40, 4);            /* payload length */
    put_be(out + 8, 0, 4);                   /* normalizing index offset */
    put_be(out + 12, 3, 4);                  /* significant digits */
    put_be(out + 16, 1, 8);                  /* lowest discernible value */
    put_be(out + 24, ORIBI_HIST_MAX, 8);     /* highest trackable value */
    put_be(out + 32, 0x3ff0000000000000, 8); /* integer to double ratio: 1.0 */
    return len;
}
