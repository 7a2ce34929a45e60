/*
 * Chunked body decoder (RFC 9112 7.1). A byte-level state machine, so a
 * chunk-size line or a trailer cut anywhere by the network resumes exactly
 * where it stopped; only chunk data is moved in bulk. Everything a client
 * sends besides data is bounded: at most 15 significant hex digits per
 * size, and the extension (with size padding) and trailer byte budgets of
 * chunked.h. The server decodes request bodies with it, the load generator
 * skips response bodies: one state machine, so both read chunked alike.
 */
#include <string.h>
#include "http/chunked.h"
#include "http/token.h"

enum {
    CH_SIZE_FIRST = 0, /* zero-filled decoder starts here */
    CH_SIZE,           /* more HEXDIG, or what ends the size */
    CH_SIZE_BWS,       /* whitespace after the size: only ';' may follow */
    CH_EXT,            /* chunk-ext up to CR */
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START, /* a trailer field, or the CR of the final empty line */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_END_LF,
    CH_DONE,
    CH_ERROR,
};

#define MAX_HEX_DIGITS 15 /* 60 bits: never overflows size_t arithmetic */

/* HEXDIG value plus one, so that 0 (the default) means "not a digit". */
static const unsigned char hexval1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
    ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

/* Bytes allowed in extensions and trailer values: no CTL but HTAB. */
static const unsigned char text_tbl[256] = {
    ['\t'] = 1,
    [0x20 ... 0x7e] = 1,
    [0x80 ... 0xff] = 1,
};

/* The state machine of both modes. Data bytes are moved down to dst, or
 * only counted when dst is NULL (a constant at each call). Returns the
 * number of input bytes the body took when it ends in buf[0..len),
 * ORIBI_CHUNKED_INCOMPLETE or ORIBI_CHUNKED_ERROR; *data_len is the number
 * of data bytes met on the way. */
static inline __attribute__((always_inline)) ssize_t run(struct oribi_chunked_decoder *d, const char *buf, size_t len,
                                                         char *dst, size_t *data_len)
{
    const char *src = buf, *end = buf + len;
    size_t data = 0;
    int st = d->_state;

    *data_len = 0;
    if (st == CH_ERROR)
        return ORIBI_CHUNKED_ERROR;

    while (src != end && st != CH_DONE) {
        unsigned char c;

        if (st == CH_DATA) {
            size_t n = (size_t)(end - src);
            if (n > d->_left)
                n = d->_left;
            if (dst && dst + data != src)
                memmove(dst + data, src, n);
            data += n;
            src += n;
            if ((d->_left -= n) == 0)
                st = CH_DATA_CR;
            continue;
        }

        c = (unsigned char)*src++;
        if (st >= CH_TRAILER_START && ++d->_trailer_bytes > ORIBI_CHUNK_TRAILER_MAX)
            goto error;

        switch (st) {
        case CH_SIZE_FIRST:
        case CH_SIZE:
            if (hexval1[c]) {
                /* Zeros before the first significant digit add nothing to
                 * the size: past the first ("0" is the last chunk) they are
                 * padding, bounded as extensions are. */
                if (d->_left == 0 && c == '0') {
                    if (st == CH_SIZE && ++d->_ext_bytes > ORIBI_CHUNK_EXT_MAX)
                        goto error;
                } else if (++d->_hex_digits > MAX_HEX_DIGITS) {
                    goto error;
                }
                d->_left = d->_left * 16 + (size_t)(hexval1[c] - 1);
                st = CH_SIZE;
                break;
            }
            if (st == CH_SIZE_FIRST)
                goto error; /* no digit: "0x", "+", whitespace, empty line */
            if (c == '\r') {
                st = CH_SIZE_LF;
            } else if (c == ';' || c == ' ' || c == '\t') {
                if (++d->_ext_bytes > ORIBI_CHUNK_EXT_MAX)
                    goto error;
                st = c == ';' ? CH_EXT : CH_SIZE_BWS;
            } else {
                goto error;
            }
            break;
        case CH_SIZE_BWS:
            /* BWS is only allowed before a chunk-ext (RFC 9112 7.1.1) */
            if (++d->_ext_bytes > ORIBI_CHUNK_EXT_MAX)
                goto error;
            if (c == ';')
                st = CH_EXT;
            else if (c != ' ' && c != '\t')
                goto error;
            break;
        case CH_EXT:
            if (c == '\r') {
                st = CH_SIZE_LF;
                break;
            }
            if (!text_tbl[c] || ++d->_ext_bytes > ORIBI_CHUNK_EXT_MAX)
                goto error;
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                goto error;
            d->_hex_digits = 0;
            st = d->_left == 0 ? CH_TRAILER_START : CH_DATA;
            break;
        case CH_DATA_CR:
            /* anything else here means the data was longer than its size */
            if (c != '\r')
                goto error;
            st = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                goto error;
            st = CH_SIZE_FIRST;
            break;
        case CH_TRAILER_START:
            if (c == '\r')
                st = CH_END_LF;
            else if (oribi_tchar[c])
                st = CH_TRAILER_NAME;
            else
                goto error; /* bare LF, obs-fold, empty name */
            break;
        case CH_TRAILER_NAME:
            if (c == ':')
                st = CH_TRAILER_VALUE;
            else if (!oribi_tchar[c])
                goto error;
            break;
        case CH_TRAILER_VALUE:
            if (c == '\r')
                st = CH_TRAILER_LF;
            else if (!text_tbl[c])
                goto error;
            break;
        case CH_TRAILER_LF:
            if (c != '\n')
                goto error;
            st = CH_TRAILER_START;
            break;
        case CH_END_LF:
            if (c != '\n')
                goto error;
            st = CH_DONE;
            break;
        }
    }

    d->_state = st;
    *data_len = data;
    return st == CH_DONE ? (ssize_t)(src - buf) : ORIBI_CHUNKED_INCOMPLETE;

error:
    d->_state = CH_ERROR;
    *data_len = data;
    return ORIBI_CHUNKED_ERROR;
}

ssize_t oribi_decode_chunked(struct oribi_chunked_decoder *d, char *buf, size_t *bufsz)
{
    size_t len = *bufsz;
    ssize_t used = run(d, buf, len, buf, bufsz);
    if (used < 0)
        return used;
    /* what follows the body belongs to the next request: keep it, after the body */
    memmove(buf + *bufsz, buf + used, len - (size_t)used);
    return (ssize_t)(len - (size_t)used);
}

ssize_t oribi_discard_chunked(struct oribi_chunked_decoder *d, const char *buf, size_t len, size_t *data_len)
{
    return run(d, buf, len, NULL, data_len);
}
