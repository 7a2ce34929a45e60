/*
 * Decoder for chunked bodies (RFC 9112 section 7.1). The one stateful
 * piece of the codec: the caller zero-fills the struct and feeds bytes as
 * they arrive. Two modes: decode (request bodies, the data is decoded in
 * place) and discard (a client that only counts body bytes: nothing is
 * written). One decoder stays in one mode.
 */
#ifndef ORIBI_CHUNKED_H
#define ORIBI_CHUNKED_H

#include <stddef.h>
#include <sys/types.h>

/* Bounds on what a peer may send besides data (an error past them: 400 for
 * a request). */
#define ORIBI_CHUNK_EXT_MAX     16384 /* bytes of chunk extensions and size zero padding, whole body */
#define ORIBI_CHUNK_TRAILER_MAX 16384 /* bytes of trailer section */

struct oribi_chunked_decoder {
    size_t _left;          /* data bytes left in the current chunk */
    size_t _ext_bytes;     /* extension bytes seen so far */
    size_t _trailer_bytes; /* trailer bytes seen so far */
    size_t _hex_digits;    /* digits of the size line being read */
    int _state;
};

/*
 * Decodes buf[0..*bufsz) in place. On return *bufsz is the number of body
 * bytes now at the start of buf (to be consumed by the caller before the
 * next call). Returns:
 *   ORIBI_CHUNKED_INCOMPLETE  more input needed;
 *   ORIBI_CHUNKED_ERROR       malformed (answer 400 and close);
 *   n >= 0                    body complete; the last n bytes of the
 *                             original input follow the body (a pipelined
 *                             request), they are moved to buf[*bufsz..].
 * Trailer fields are validated and discarded, never merged into the head.
 */
#define ORIBI_CHUNKED_ERROR      (-1)
#define ORIBI_CHUNKED_INCOMPLETE (-2)
ssize_t oribi_decode_chunked(struct oribi_chunked_decoder *d, char *buf, size_t *bufsz);

/*
 * Discard mode: reads buf[0..len) as oribi_decode_chunked would, without
 * writing to it; *data_len is the number of data bytes in it. Returns
 * ORIBI_CHUNKED_INCOMPLETE (all of buf consumed), ORIBI_CHUNKED_ERROR, or
 * n >= 0: the body ended with buf[n - 1], what follows is not its own.
 */
ssize_t oribi_discard_chunked(struct oribi_chunked_decoder *d, const char *buf, size_t len, size_t *data_len);

#endif
