#include "loop/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void oribi_log(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof(line) - 1, "oribi[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - 1 - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + ((size_t)m < sizeof(line) - 1 - (size_t)n ? (size_t)m : sizeof(line) - 2 - (size_t)n);
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}
