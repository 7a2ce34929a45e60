/*
 * Request queue time: how long a request waited before the app got it,
 * counted from the moment the worker first saw it (accept of a new
 * connection, first byte of a next request on a kept-alive one, end of the
 * previous response for a pipelined one) or, when a proxy says so, from
 * its X-Request-Start header. Kept as histogram buckets (docs/CONTROL.md).
 */
#ifndef ORIBI_QUEUE_TIME_H
#define ORIBI_QUEUE_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

/* Upper bounds of the buckets, in microseconds; the last bucket is +Inf. */
#define ORIBI_QUEUE_BUCKETS 14
extern const int64_t oribi_queue_bounds_us[ORIBI_QUEUE_BUCKETS - 1];

/* Index of the bucket for a queue time in microseconds (>= 0). */
static inline int oribi_queue_bucket(int64_t us)
{
    int i = 0;
    while (i < ORIBI_QUEUE_BUCKETS - 1 && us > oribi_queue_bounds_us[i])
        i++;
    return i;
}

/* The X-Request-Start header of req as wall-clock microseconds since the
 * epoch, or -1 when absent or not understood. Forms: "t=SECONDS[.FRACTION]"
 * (nginx ${msec}), "t=MICROSECONDS", "t=MILLISECONDS", or the same without
 * "t=" (Heroku's milliseconds): the unit is told from the magnitude. */
int64_t oribi_request_start_us(const struct oribi_request *req);

/* Parses one header value as above; -1 when not understood. */
int64_t oribi_parse_request_start(const char *v, size_t len);

#endif
