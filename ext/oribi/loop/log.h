/*
 * A line to the error log from C, without the GVL, in one write(2) to fd 2
 * (which Log.reopen points at stderr_path), in the format Oribi::Log uses
 * (log_format): "oribi[PID]: MESSAGE", or one JSON object or LTSV record
 * with time, level, pid, worker and msg. For the loop's own errors: every
 * 5xx the server answers by itself is logged with its cause.
 */
#ifndef ORIBI_LOG_H
#define ORIBI_LOG_H

#include <stdint.h>

enum oribi_log_format { ORIBI_LOG_TEXT = 0, ORIBI_LOG_JSON = 1, ORIBI_LOG_LTSV = 2 };

/* The format, and the worker's index (-1 in the master), from Log.setup. */
void oribi_log_setup(enum oribi_log_format format, int worker);

void oribi_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A count the log reports as it grows, at most every so often, so that a
 * flood of events cannot flood the log too. */
struct oribi_tally {
    uint64_t count;
    uint64_t told;   /* of which a log line told already */
    int64_t told_at; /* when (ms) */
};

/* How many the tally counted since its last log line, when one is due now
 * (the first at once, then at most every every_ms), else 0. */
uint64_t oribi_tally_due(struct oribi_tally *t, int64_t now, int64_t every_ms);

#endif
