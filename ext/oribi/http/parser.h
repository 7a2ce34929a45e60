/*
 * HTTP/1.1 head parsers (RFC 9112), picohttpparser-style: stateless,
 * allocation-free, over a caller-owned buffer. Requests for the server,
 * responses for the clients (the load generator, `oribi ctl`); both read
 * header fields with the same code. Strict: anything the RFC does not allow
 * is an error, for requests carrying the status to answer with.
 */
#ifndef ORIBI_PARSER_H
#define ORIBI_PARSER_H

#include <stddef.h>
#include <stdint.h>

#define ORIBI_PARSE_ERROR      (-1)
#define ORIBI_PARSE_INCOMPLETE (-2)

/* Defaults for struct oribi_limits, the only place they are written: the
 * server's options table (lib/oribi/options.rb) reads them as
 * Oribi::Parser::DEFAULT_*. */
#define ORIBI_DEFAULT_MAX_REQUEST_LINE 8192  /* bytes, over it: 414 */
#define ORIBI_DEFAULT_MAX_HEADER_BYTES 65536 /* bytes of header fields, over it: 431 */
#define ORIBI_DEFAULT_MAX_HEADERS      100   /* fields, over it: 431 */

struct oribi_limits {
    size_t max_request_line;
    size_t max_header_bytes;
    size_t max_headers;
};

struct oribi_header {
    const char *name;
    size_t name_len;
    const char *value; /* leading and trailing OWS removed */
    size_t value_len;
};

struct oribi_request {
    /* out: request line */
    const char *method;
    size_t method_len;
    const char *target; /* request-target exactly as sent */
    size_t target_len;
    const char *path; /* origin-form path+query ("/a?b"); for absolute-form the
                                  part after the authority ("/" if empty; it starts with
                                  '?' for "http://h?q", whose path is empty); "*" for
                                  OPTIONS *; the authority itself for CONNECT */
    size_t path_len;
    int minor_version; /* 0 or 1 (HTTP/1.2..1.9 are read as 1) */

    /* in: capacity of headers[]; out: fields stored. Written only once the
       head is parsed (or on 417), so a retry after INCOMPLETE needs no reset. */
    struct oribi_header *headers;
    size_t num_headers;

    /* out: semantics the connection layer needs */
    const char *host;       /* Host field, or the authority of an absolute-form target */
    size_t host_len;        /* host == NULL when neither was sent */
    int64_t content_length; /* -1 when absent */
    int chunked;            /* Transfer-Encoding: chunked */
    int keepalive;          /* persistent per version + Connection field; never after CONNECT */
    int expect_continue;    /* Expect: 100-continue */
    int upgrade;            /* Connection: upgrade + Upgrade field present */

    /* out on ORIBI_PARSE_ERROR: 400, 414, 417, 431, 501 or 505 */
    int status;

    /* out: bytes of the head, as returned on success. Also set, with every
       field above, on 417 (unmet Expect): the head is otherwise valid and its
       body framing known, so the connection may skip the body and go on.
       Every other error leaves the framing unknown: answer and close. */
    size_t head_len;
};

/*
 * Parses the request head in buf[0..len). last_len is how many bytes were
 * there at the previous call for this request (0 the first time), so a
 * resumed call only looks for the end of the head in the new bytes.
 * Leading empty lines (CRLF) before the request line are skipped.
 * Returns the number of bytes of the head (up to and including the empty
 * line), ORIBI_PARSE_INCOMPLETE, or ORIBI_PARSE_ERROR with req->status set.
 * An incomplete head already over a limit is an error (414 / 431).
 */
int oribi_parse_request(const char *buf, size_t len, size_t last_len, struct oribi_request *req,
                        const struct oribi_limits *limits);

/* The head parsed from from[0..len) was copied to to: every field that
 * pointed into it points at the same byte of the copy. Others (a constant
 * path) stay. */
void oribi_request_rebase(struct oribi_request *req, const char *from, size_t len, const char *to);

/* How a response body is delimited (RFC 9112 6.3). */
enum oribi_framing {
    ORIBI_FRAMING_NONE,        /* 1xx, 204, 304, or an answer to HEAD */
    ORIBI_FRAMING_LENGTH,      /* content_length bytes (maybe 0) */
    ORIBI_FRAMING_CHUNKED,     /* Transfer-Encoding ending in chunked */
    ORIBI_FRAMING_UNTIL_CLOSE, /* neither, or a final coding other than chunked */
};

struct oribi_response_head {
    int minor_version;  /* 0 or 1 */
    int status;         /* 100..599 */
    const char *reason; /* reason phrase as sent, maybe empty */
    size_t reason_len;

    /* in: capacity of headers[], or headers == NULL to store none (then
     * there is no limit on their number); out: fields stored. Written only
     * on success. More fields than the capacity is an error. */
    struct oribi_header *headers;
    size_t num_headers;

    int64_t content_length; /* -1 when absent or overridden by Transfer-Encoding */
    int framing;            /* enum oribi_framing */
    int keepalive;          /* the connection may carry another request after it */
};

/*
 * Parses the response head at the start of buf[0..len); head_request says
 * the request was HEAD (its answer has no body). Returns the number of
 * bytes of the head (up to and including the empty line),
 * ORIBI_PARSE_INCOMPLETE, or ORIBI_PARSE_ERROR as soon as the bytes seen
 * cannot start a valid head: so a stream that is not HTTP fails at once
 * instead of at a timeout. The caller bounds the head by giving at most as
 * many bytes as it accepts (heads over 256 MiB are errors anyway).
 */
int oribi_parse_response(const char *buf, size_t len, int head_request, struct oribi_response_head *res);

/* 1 when the CPU path in use is a SIMD one (AVX2, SSE4.2 or NEON), 0 for
 * the portable one. The path is chosen once at load time from the CPU;
 * ORIBI_NO_SSE42=1 in the environment forces the portable one, and
 * ORIBI_NO_AVX2=1 the SSE4.2 one; on aarch64 (NEON always) ORIBI_NO_NEON=1
 * the portable one (to test or benchmark them). */
int oribi_parser_simd(void);

/* The path in use: "AVX2", "SSE4.2", "NEON" or "portable". */
const char *oribi_parser_path(void);

#endif
