#include "http/queue_time.h"

#include <strings.h>

/* 1 ms .. 10 s, Prometheus' usual latency ladder with 1 ms at the bottom. */
const int64_t oribi_queue_bounds_us[ORIBI_QUEUE_BUCKETS - 1] = {
    1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

/* Epoch seconds in these ranges tell the unit apart for any date between
 * 2001 and 2286: 1e9..1e10 s, 1e12..1e13 ms, 1e15..1e16 us. */
int64_t oribi_parse_request_start(const char *v, size_t len)
{
    size_t i = 0;
    if (len >= 2 && v[0] == 't' && v[1] == '=')
        i = 2;
    int64_t whole = 0;
    int digits = 0;
    for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
        if (++digits > 17) /* beyond any unit's range: refuse before overflow */
            return -1;
        whole = whole * 10 + (v[i] - '0');
    }
    if (!digits)
        return -1;
    int64_t frac_us = 0;
    if (i < len && v[i] == '.') {
        int64_t scale = 100000;
        for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
            frac_us += (v[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (i != len)
        return -1;
    if (whole >= 1000000000LL && whole < 10000000000LL)
        return whole * 1000000 + frac_us;
    if (whole >= 1000000000000LL && whole < 10000000000000LL)
        return whole * 1000;
    if (whole >= 1000000000000000LL && whole < 10000000000000000LL)
        return whole;
    return -1;
}

int64_t oribi_request_start_us(const struct oribi_request *req)
{
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct oribi_header *h = &req->headers[i];
        if (h->name_len == 15 && strncasecmp(h->name, "x-request-start", 15) == 0)
            return oribi_parse_request_start(h->value, h->value_len);
    }
    return -1;
}
