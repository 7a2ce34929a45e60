/* Splitting and decoding of urlencoded pairs: see query.h. */
#include <string.h>

#include "http/query.h"

static int is_sep(unsigned char c, int sep)
{
    switch (sep) {
    case ORIBI_QUERY_SEP_SEMI:
        return c == ';';
    case ORIBI_QUERY_SEP_SEMI_COMMA:
        return c == ';' || c == ',';
    default:
        return c == '&';
    }
}

size_t oribi_query_count_seps(const char *s, size_t len, int sep)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += is_sep((unsigned char)s[i], sep);
    return n;
}

size_t oribi_query_next_piece(const char *s, size_t len, size_t *pos, int sep, int *more)
{
    size_t start = *pos, i = start;
    while (i < len && !is_sep((unsigned char)s[i], sep))
        i++;
    *more = i < len;
    if (!*more) {
        *pos = len;
        return len - start;
    }
    /* Rack's separator regexps ("& *" and the like) eat the spaces after
     * the separator, so they never start the next key. */
    size_t next = i + 1;
    while (next < len && s[next] == ' ')
        next++;
    *pos = next;
    return i - start;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t oribi_query_decode(const char *s, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '+') {
            out[o++] = ' ';
        } else if (c != '%') {
            out[o++] = (char)c;
        } else {
            int hi = i + 1 < len ? hex_value((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < len ? hex_value((unsigned char)s[i + 2]) : -1;
            /* URI.decode_www_form_component refuses any lone '%'. */
            if (hi < 0 || lo < 0)
                return ORIBI_QUERY_BAD_ESCAPE;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        }
    }
    return o;
}
