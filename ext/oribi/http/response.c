#include "http/response.h"
#include "http/token.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct status_entry {
    int code;
    const char *reason;
};

/* RFC 9110 section 15 plus the few registered codes apps use (RFC 6585, 8297). */
static const struct status_entry reasons[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {103, "Early Hints"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {203, "Non-Authoritative Information"},
    {204, "No Content"},
    {205, "Reset Content"},
    {206, "Partial Content"},
    {207, "Multi-Status"},
    {300, "Multiple Choices"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {402, "Payment Required"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {406, "Not Acceptable"},
    {407, "Proxy Authentication Required"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Content"},
    {423, "Locked"},
    {425, "Too Early"},
    {426, "Upgrade Required"},
    {428, "Precondition Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {451, "Unavailable For Legal Reasons"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
    {507, "Insufficient Storage"},
    {511, "Network Authentication Required"},
};
#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))

const char *oribi_reason(int status)
{
    for (size_t i = 0; i < NREASONS; i++)
        if (reasons[i].code == status)
            return reasons[i].reason;
    return "Unknown";
}

/* Status lines are formatted once per code into a table indexed by code, so
 * the hot path is an array lookup. Built when the library is loaded, before
 * any thread can read it: a table filled lazily would be written by the
 * loop's thread and read by app threads at once. Codes are 100..999 (Rack
 * SPEC). */
static char status_lines[1000][48];
static unsigned char status_lens[1000];

__attribute__((constructor)) static void build_status_lines(void)
{
    for (int status = 100; status <= 999; status++)
        status_lens[status] = (unsigned char)snprintf(status_lines[status], sizeof(status_lines[status]),
                                                      "HTTP/1.1 %d %s\r\n", status, oribi_reason(status));
}

const char *oribi_status_line(int status, size_t *len)
{
    if (status < 100 || status > 999)
        status = 500;
    *len = status_lens[status];
    return status_lines[status];
}

const char *oribi_date_header(struct oribi_date_cache *d, time_t now, size_t *len)
{
    if (now != d->at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        d->len = strftime(d->buf, sizeof(d->buf), "date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        d->at = now;
    }
    *len = d->len;
    return d->buf;
}

int oribi_field_name_ok(const char *name, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!oribi_tchar[(unsigned char)name[i]])
            return 0;
    return 1;
}

int oribi_field_value_ok(const char *value, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

int oribi_hop_by_hop(const char *name, size_t len)
{
    switch (len) {
    case 2:
        return strncasecmp(name, "te", 2) == 0 ? ORIBI_HOP_OTHER : 0;
    case 7:
        return strncasecmp(name, "trailer", 7) == 0 ? ORIBI_HOP_OTHER : 0;
    case 10:
        if (strncasecmp(name, "connection", 10) == 0)
            return ORIBI_HOP_CONNECTION;
        return strncasecmp(name, "keep-alive", 10) == 0 ? ORIBI_HOP_OTHER : 0;
    case 14:
        return strncasecmp(name, "content-length", 14) == 0 ? ORIBI_HOP_CONTENT_LENGTH : 0;
    case 16:
        return strncasecmp(name, "proxy-connection", 16) == 0 ? ORIBI_HOP_OTHER : 0;
    case 17:
        return strncasecmp(name, "transfer-encoding", 17) == 0 ? ORIBI_HOP_TRANSFER_ENCODING : 0;
    }
    return 0;
}

size_t oribi_error_response(char *out, size_t cap, int status, struct oribi_date_cache *d, time_t now, int keep,
                            int head)
{
    size_t sl_len, date_len;
    const char *sl = oribi_status_line(status, &sl_len);
    const char *date = oribi_date_header(d, now, &date_len);
    const char *reason = oribi_reason(status);
    int n = snprintf(out, cap,
                     "%.*s%.*scontent-type: text/plain\r\ncontent-length: %zu\r\n"
                     "%s\r\n%s%s",
                     (int)sl_len, sl, (int)date_len, date, strlen(reason) + 1, keep ? "" : "connection: close\r\n",
                     head ? "" : reason, head ? "" : "\n");
    return (n < 0 || (size_t)n >= cap) ? 0 : (size_t)n;
}

size_t oribi_content_length(char *out, uint64_t n)
{
    static const char name[] = "content-length: ";
    char tmp[20];
    size_t i = 0, len = sizeof(name) - 1;
    memcpy(out, name, len);
    do {
        tmp[i++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    while (i)
        out[len++] = tmp[--i];
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}

size_t oribi_chunk_prefix(char *out, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    size_t i = 0;
    do {
        tmp[i++] = hex[n & 15];
        n >>= 4;
    } while (n);
    size_t len = 0;
    while (i)
        out[len++] = tmp[--i];
    out[len++] = '\r';
    out[len++] = '\n';
    return len;
}
