#include "loop/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void oribi_log(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "oribi[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2; /* a cut line still ends with its newline */
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}
