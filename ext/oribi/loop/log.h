/*
 * A line to the error log from C, without the GVL: "oribi[PID]: MESSAGE",
 * the format of Oribi::Log, in one write(2) to fd 2 (which Log.reopen
 * points at stderr_path). For the loop's own errors: every 5xx the server
 * answers by itself is logged with its cause.
 */
#ifndef ORIBI_LOG_H
#define ORIBI_LOG_H

void oribi_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
