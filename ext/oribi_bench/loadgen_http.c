/*
 * Response framing for the load generator: where a response head ends, how
 * its body is delimited, and whether the connection survives it. Every
 * length comes from the network, so each one is bounded before use; a
 * response we cannot frame with certainty is an error, never a guess.
 */
#include <string.h>

#include "http/token.h"
#include "loadgen.h"

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

/* Field values and reason phrases: VCHAR, obs-text, SP, HTAB. */
static inline int is_text(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

static int ieq(const char *a, size_t alen, const char *lit)
{
    size_t n = strlen(lit);
    if (alen != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != (unsigned char)lit[i])
            return 0;
    return 1;
}

/*
 * Walks a comma-separated list (Connection, Transfer-Encoding), calling back
 * with each element trimmed of whitespace and of ";parameters".
 */
struct list_seen {
    int close, keep_alive, last_chunked, any;
};

static void scan_list(const char *v, size_t len, int is_te, struct list_seen *s)
{
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && v[i] != ',')
            i++;
        size_t end = i++;
        size_t semi = start;
        while (semi < end && v[semi] != ';')
            semi++;
        end = semi;
        while (start < end && (v[start] == ' ' || v[start] == '\t'))
            start++;
        while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
            end--;
        if (end == start)
            continue; /* empty list elements are allowed and ignored */
        if (is_te) {
            s->any = 1;
            s->last_chunked = ieq(v + start, end - start, "chunked");
        } else if (ieq(v + start, end - start, "close")) {
            s->close = 1;
        } else if (ieq(v + start, end - start, "keep-alive")) {
            s->keep_alive = 1;
        }
    }
}

/* Content-Length: all digits, below 10^18 so it fits any later arithmetic. */
static int64_t parse_length(const char *v, size_t len)
{
    if (len == 0 || len > 18)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit((unsigned char)v[i]))
            return -1;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

int oribi_lg_parse_response(const char *buf, size_t len, struct oribi_lg_response *r)
{
    /* Fail fast on garbage instead of waiting for an empty line that may
     * never come: the first 8 bytes must be "HTTP/1.x". */
    static const char proto[] = "HTTP/1.";
    size_t pre = len < 7 ? len : 7;
    if (memcmp(buf, proto, pre) != 0)
        return ORIBI_LG_ERROR;
    if (len >= 8 && (buf[7] != '0' && buf[7] != '1'))
        return ORIBI_LG_ERROR;

    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (end == NULL) {
        /* A server ending lines with bare LF would never produce the empty
         * line we wait for: say so now rather than at the timeout. */
        for (const char *lf = buf; (lf = memchr(lf, '\n', len - (size_t)(lf - buf))); lf++)
            if (lf == buf || lf[-1] != '\r')
                return ORIBI_LG_ERROR;
        return ORIBI_LG_INCOMPLETE;
    }
    size_t head_len = (size_t)(end - buf) + 4;
    const char *p = buf + 8, *last = end + 2; /* last: start of the final CRLF */

    /* status-line = HTTP-version SP 3DIGIT SP [ reason-phrase ] CRLF; a
     * missing SP before an empty reason is common enough to accept. */
    if (p + 4 > last || *p != ' ' || !is_digit(p[1]) || !is_digit(p[2]) || !is_digit(p[3]))
        return ORIBI_LG_ERROR;
    r->minor_version = buf[7] - '0';
    r->status = (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
    if (r->status < 100 || r->status > 599)
        return ORIBI_LG_ERROR;
    p += 4;
    if (*p == ' ') {
        for (p++; *p != '\r'; p++)
            if (!is_text((unsigned char)*p))
                return ORIBI_LG_ERROR;
    }
    if (p[0] != '\r' || p[1] != '\n')
        return ORIBI_LG_ERROR;
    p += 2;

    struct list_seen conn = {0}, te = {0};
    int64_t cl = -1;
    while (p < last) {
        const char *name = p;
        while (p < last && oribi_tchar[(unsigned char)*p])
            p++;
        /* Also rejects obs-fold and whitespace before the colon. */
        if (p == name || p >= last || *p != ':')
            return ORIBI_LG_ERROR;
        size_t name_len = (size_t)(p - name);
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *value = p;
        while (*p != '\r') {
            if (!is_text((unsigned char)*p))
                return ORIBI_LG_ERROR; /* bare LF, NUL, controls */
            p++;
        }
        if (p[1] != '\n')
            return ORIBI_LG_ERROR;
        const char *vend = p;
        while (vend > value && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        size_t vlen = (size_t)(vend - value);
        p += 2;

        if (ieq(name, name_len, "content-length")) {
            int64_t n = parse_length(value, vlen);
            if (n < 0 || (cl >= 0 && n != cl))
                return ORIBI_LG_ERROR;
            cl = n;
        } else if (ieq(name, name_len, "transfer-encoding")) {
            scan_list(value, vlen, 1, &te);
        } else if (ieq(name, name_len, "connection")) {
            scan_list(value, vlen, 0, &conn);
        }
    }

    r->close = conn.close || (r->minor_version == 0 && !conn.keep_alive);
    r->chunked = te.any && te.last_chunked;
    r->until_close = te.any && !te.last_chunked;
    /* RFC 9112 section 6.3: Transfer-Encoding overrides Content-Length. */
    r->content_length = te.any ? -1 : cl;
    if (r->until_close)
        r->close = 1;
    return (int)head_len;
}

enum {
    CH_SIZE0 = 0, /* zero-filled start: first hex digit of a size line */
    CH_SIZE,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START,
    CH_TRAILER,
    CH_TRAILER_LF,
    CH_END_LF,
};

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

ssize_t oribi_lg_skip_chunked(struct oribi_lg_chunked *d, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)buf[i];
        switch (d->_state) {
        case CH_DATA: {
            /* The only state that may cover many bytes: skip them at once. */
            size_t n = len - i;
            if (n > d->_left)
                n = (size_t)d->_left;
            d->_left -= n;
            i += n;
            if (d->_left == 0)
                d->_state = CH_DATA_CR;
            continue;
        }
        case CH_SIZE0:
        case CH_SIZE: {
            int h = hexval(c);
            if (h >= 0) {
                /* Leading zeros are legal but not endless; sizes stay < 2^60. */
                if (++d->_digits > 32 || (d->_left >> 56) != 0)
                    return ORIBI_LG_ERROR;
                d->_left = (d->_left << 4) | (unsigned)h;
                d->_state = CH_SIZE;
            } else if (d->_state == CH_SIZE0) {
                return ORIBI_LG_ERROR;
            } else if (c == ';' || c == ' ' || c == '\t') {
                d->_state = CH_EXT; /* BWS and chunk-ext: skipped, bounded */
            } else if (c == '\r') {
                d->_state = CH_SIZE_LF;
            } else {
                return ORIBI_LG_ERROR;
            }
            break;
        }
        case CH_EXT:
            if (c == '\r')
                d->_state = CH_SIZE_LF;
            else if (!is_text(c) || ++d->_meta > ORIBI_LG_CHUNK_META_MAX)
                return ORIBI_LG_ERROR;
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return ORIBI_LG_ERROR;
            d->_digits = 0;
            d->_state = d->_left ? CH_DATA : CH_TRAILER_START;
            break;
        case CH_DATA_CR:
            if (c != '\r')
                return ORIBI_LG_ERROR; /* data longer than its size */
            d->_state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return ORIBI_LG_ERROR;
            d->_state = CH_SIZE0;
            break;
        case CH_TRAILER_START:
            if (c == '\r') {
                d->_state = CH_END_LF;
                break;
            }
            d->_state = CH_TRAILER; /* this byte starts a trailer field */
            __attribute__((fallthrough));
        case CH_TRAILER:
            if (c == '\r')
                d->_state = CH_TRAILER_LF;
            else if (!is_text(c) || ++d->_meta > ORIBI_LG_CHUNK_META_MAX)
                return ORIBI_LG_ERROR;
            break;
        case CH_TRAILER_LF:
            if (c != '\n')
                return ORIBI_LG_ERROR;
            d->_state = CH_TRAILER_START;
            break;
        case CH_END_LF:
            if (c != '\n')
                return ORIBI_LG_ERROR;
            return (ssize_t)(i + 1);
        default:
            return ORIBI_LG_ERROR;
        }
        i++;
    }
    return ORIBI_LG_INCOMPLETE;
}
