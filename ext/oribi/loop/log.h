/*
 * A line to the error log from C, without the GVL, in one write(2) to fd 2
 * (which Log.reopen points at stderr_path), in the format Oribi::Log uses
 * (log_format): "oribi[PID]: MESSAGE", or one JSON object or LTSV record
 * with time, level, pid, worker and msg. For the loop's own errors: every
 * 5xx the server answers by itself is logged with its cause.
 */
#ifndef ORIBI_LOG_H
#define ORIBI_LOG_H

enum oribi_log_format { ORIBI_LOG_TEXT = 0, ORIBI_LOG_JSON = 1, ORIBI_LOG_LTSV = 2 };

/* The format, and the worker's index (-1 in the master), from Log.setup. */
void oribi_log_setup(enum oribi_log_format format, int worker);

void oribi_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
