#include "loop/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum oribi_log_format log_format = ORIBI_LOG_TEXT;
static int log_worker = -1;

void oribi_log_setup(enum oribi_log_format format, int worker)
{
    log_format = format;
    log_worker = worker;
}

/* Appends s to out[*n..cap) escaped for the format: JSON string contents,
 * or an LTSV value (no tab or newline); control bytes, and for JSON bytes
 * above 0x7f, as \u00XX or \xXX. Stops short of cap. */
static void put_escaped(char *out, size_t *n, size_t cap, const char *s, int json)
{
    for (; *s && *n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (json && (c == '"' || c == '\\')) {
            out[(*n)++] = '\\';
            out[(*n)++] = (char)c;
        } else if (c < 0x20 || c == 0x7f || (json && c > 0x7f) || (!json && c == '\\')) {
            *n += (size_t)snprintf(out + *n, cap - *n, json ? "\\u%04x" : "\\x%02x", c);
        } else {
            out[(*n)++] = (char)c;
        }
    }
}

void oribi_log(const char *fmt, ...)
{
    char msg[1024], line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t n = 0, cap = sizeof(line) - 4; /* room for the closing bytes */
    if (log_format == ORIBI_LOG_TEXT) {
        n = (size_t)snprintf(line, cap, "oribi[%d]: %s", (int)getpid(), msg);
        if (n >= cap)
            n = cap - 1; /* a cut line still ends with its newline */
    } else {
        struct timespec ts;
        struct tm tm;
        char when[32], worker[16];
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        int json = log_format == ORIBI_LOG_JSON;
        if (log_worker >= 0)
            snprintf(worker, sizeof(worker), "%d", log_worker);
        else
            strcpy(worker, json ? "null" : "-");
        n = (size_t)snprintf(line, cap,
                             json ? "{\"time\":\"%s.%03ldZ\",\"level\":\"error\",\"pid\":%d,\"worker\":%s,\"msg\":\""
                                  : "time:%s.%03ldZ\tlevel:error\tpid:%d\tworker:%s\tmsg:",
                             when, ts.tv_nsec / 1000000, (int)getpid(), worker);
        put_escaped(line, &n, cap, msg, json);
        if (json) {
            line[n++] = '"';
            line[n++] = '}';
        }
    }
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
}
