/*
 * Response head formatting: pure functions over caller-owned buffers.
 * No Ruby, no I/O; the engine gathers the pieces and the loop writes them.
 */
#ifndef ORIBI_RESPONSE_H
#define ORIBI_RESPONSE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* "HTTP/1.1 200 OK\r\n" for status; unknown codes get a generic reason.
 * Returns the line (static storage, built at load, read-only after: any
 * thread) and its length in *len. */
const char *oribi_status_line(int status, size_t *len);

/* The reason phrase alone ("Not Found"), "Unknown" for codes we do not name. */
const char *oribi_reason(int status);

/* The date field of the last second asked for. Each thread that writes
 * responses owns one (the loop its own, each app thread its exchange's):
 * one cache shared by the loop and app threads would be rewritten by one
 * while another copies it. All zeroes is an empty cache (no response is
 * dated 1970). */
struct oribi_date_cache {
    time_t at;
    size_t len;
    char buf[48];
};

/* "date: Sun, 06 Nov 1994 08:49:37 GMT\r\n", reformatted into d at most
 * once per second; the returned pointer stays valid until the next call
 * with d. */
const char *oribi_date_header(struct oribi_date_cache *d, time_t now, size_t *len);

/* 1 when name is a valid field-name (token) and value holds no CR, LF, NUL
 * or other control byte but HTAB: what may reach the wire as one field line. */
int oribi_field_name_ok(const char *name, size_t len);
int oribi_field_value_ok(const char *value, size_t len);

/* Hop-by-hop fields the server owns (RFC 9110 7.6.1): the app's copies are
 * not forwarded. Returns ORIBI_HOP_* or 0 for an end-to-end field. */
enum {
    ORIBI_HOP_CONNECTION = 1,
    ORIBI_HOP_CONTENT_LENGTH,
    ORIBI_HOP_TRANSFER_ENCODING,
    ORIBI_HOP_OTHER /* keep-alive, proxy-connection, te, trailer */
};
int oribi_hop_by_hop(const char *name, size_t len);

/* Formats a complete error response (status line, date from d, short text
 * body, and connection: close unless keep) into out; for a HEAD request
 * (head) the same head and no body. Returns its length, or 0 when cap is
 * too small. */
size_t oribi_error_response(char *out, size_t cap, int status, struct oribi_date_cache *d, time_t now, int keep,
                            int head);

/* Whether the request whose bytes start at buf (len of them, its head
 * perhaps not all there yet) is a HEAD request: the answers the server
 * makes itself, also to a request it could not parse, follow the HEAD
 * rule whenever its method is known. */
static inline int oribi_is_head(const char *buf, size_t len)
{
    return len >= 5 && buf[0] == 'H' && buf[1] == 'E' && buf[2] == 'A' && buf[3] == 'D' && buf[4] == ' ';
}

/* Writes "content-length: <n>\r\n"; returns its length (<= 38). A
 * formatter of its own: snprintf costs a hello response ~600 instructions. */
size_t oribi_content_length(char *out, uint64_t n);

/* Writes "<hex size>\r\n" for a chunk of n bytes; returns its length (<= 18). */
size_t oribi_chunk_prefix(char *out, size_t n);

#endif
