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

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0:
 * no overlong forms, surrogates or code points past U+10FFFF. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || p[0] > 0xf4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) || (p[0] == 0xf0 && p[1] < 0x90) ||
        (p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

/* The code point of the valid UTF-8 sequence of len bytes at p. */
static unsigned code_point(const unsigned char *p, size_t len)
{
    unsigned cp = p[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++)
        cp = cp << 6 | (p[i] & 0x3f);
    return cp;
}

/* Appends s to out[*n..cap) as Oribi::Log writes bytes, every line ASCII:
 * in JSON a valid UTF-8 sequence as its \uXXXX escape (a surrogate pair
 * past U+FFFF) and any other byte, and the backslash, as \xNN (Log.utf8);
 * in text and LTSV every byte past ASCII, and the backslash, as \xNN
 * (Log.ascii). Control bytes as \u00XX in JSON, as \xNN in LTSV, and in
 * text too except the tab and the newline, which starts a line of four
 * spaces. Stops short of cap. */
static void put_escaped(char *out, size_t *n, size_t cap, const char *s, enum oribi_log_format format)
{
    const char *bs = format == ORIBI_LOG_JSON ? "\\\\" : "\\";
    size_t left = strlen(s);
    while (left > 0 && *n + 12 < cap) {
        const unsigned char *p = (const unsigned char *)s;
        size_t len = format == ORIBI_LOG_JSON ? utf8_sequence(p, left) : *p < 0x80;
        if (len > 1) {
            unsigned cp = code_point(p, len);
            if (cp > 0xffff)
                *n += (size_t)snprintf(out + *n, cap - *n, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
                                       0xdc00 + ((cp - 0x10000) & 0x3ff));
            else
                *n += (size_t)snprintf(out + *n, cap - *n, "\\u%04x", cp);
        } else if (len == 0 || *p == '\\') {
            *n += (size_t)snprintf(out + *n, cap - *n, "%sx%02x", bs, *p);
            len = 1;
        } else if (format == ORIBI_LOG_TEXT && *p == '\n') {
            memcpy(out + *n, "\n    ", 5);
            *n += 5;
        } else if (*p < 0x20 || *p == 0x7f) {
            if (format == ORIBI_LOG_TEXT && *p == '\t')
                out[(*n)++] = '\t';
            else
                *n += (size_t)snprintf(out + *n, cap - *n, format == ORIBI_LOG_JSON ? "\\u%04x" : "\\x%02x", *p);
        } else {
            if (format == ORIBI_LOG_JSON && *p == '"')
                out[(*n)++] = '\\';
            out[(*n)++] = (char)*p;
        }
        s += len;
        left -= len;
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
        n = (size_t)snprintf(line, cap, "oribi[%d]: ", (int)getpid());
        put_escaped(line, &n, cap, msg, log_format);
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
        put_escaped(line, &n, cap, msg, log_format);
        if (json) {
            line[n++] = '"';
            line[n++] = '}';
        }
    }
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
}

uint64_t oribi_tally_due(struct oribi_tally *t, int64_t now, int64_t every_ms)
{
    if (t->count == t->told || (t->told && now - t->told_at < every_ms))
        return 0;
    uint64_t n = t->count - t->told;
    t->told = t->count;
    t->told_at = now;
    return n;
}
