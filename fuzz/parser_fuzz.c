/*
 * libFuzzer target for the codec: the request parser, the response parser
 * and the chunked decoder in both its modes.
 *
 * Input layout: [flags][lim_a][lim_b][n][n piece lengths - 1][payload]
 *   flags bit 2  clear: the payload is a request head
 *                  bit 0  small limits: max_request_line = 8 + lim_a,
 *                         max_header_bytes = 8 + lim_b, max_headers = flags >> 4
 *                  bit 3  headers[] capacity is lim_a & 7 instead of 64
 *   flags bit 2  set, bit 3 clear: the payload is a chunked body
 *   flags bits 2 and 3 set: the payload is a response head
 *                  bit 0  headers[] capacity is lim_a & 7 instead of 64
 *                  bit 4  it answers a HEAD request
 *   flags bit 1  feed one byte at a time (payloads up to 512 bytes)
 * The payload is fed in pieces of the given lengths (the last one takes the
 * rest), each prefix in a heap block of exactly its size so that ASan sees
 * any read past buf + len.
 *
 * Properties checked besides memory safety:
 *   - the AVX2, SSE4.2 and portable instantiations give identical results,
 *     and on aarch64 the NEON and portable ones;
 *   - a resumed call (last_len) that answers gives the one-shot answer, and
 *     one that says INCOMPLETE is never hiding a complete head;
 *   - an answer on a prefix is the answer on the whole input (the parse
 *     decides on bytes already seen), for requests and responses;
 *   - a head over the request-line limit is refused without waiting;
 *   - a parsed head copied elsewhere (oribi_request_rebase) has every field
 *     at the same offset of the copy;
 *   - a response head parses alike with and without fields stored, and its
 *     framing is consistent with its status;
 *   - the chunked decoder gives the same body, rest and verdict however the
 *     input is cut, and discard mode the same verdict, data byte count and
 *     end of body as decoding.
 * parser.c is included so that both instantiations can be called directly.
 *
 * Built with -DORIBI_FUZZ_DUMP (fuzz/replay.c) it also prints what each
 * input parsed to, for a build on another CPU to print alike.
 */
#include "../ext/oribi/http/parser.c"
#include "../ext/oribi/http/chunked.h"

#include <stdio.h>

#include "check.h"

#define MAX_PIECES 16
#define HEADER_CAP 64

#ifdef ORIBI_FUZZ_DUMP
/* An input's outcome as one line: the verdict, then a hash of every field
 * (offsets, lengths, flags; the structs hold 8-byte integers only, so a
 * little-endian LP64 build lays them out alike). Enough to show where two
 * builds part; the input is there to replay. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3;
    return h;
}

static void dump(const char *what, long r, long status, const void *fields, size_t n)
{
    printf(" %s %ld %ld %016llx", what, r, status, (unsigned long long)fnv(0xcbf29ce484222325, fields, n));
}
#else
#define dump(what, r, status, fields, n) ((void)0)
#endif

/* Everything a parse returns, with pointers as offsets so that results over
 * different copies of the same bytes compare with memcmp. */
struct snap {
    long r, status;
    long method, method_len, target, target_len, path, path_len, minor;
    long num_headers, host, host_len, chunked, keepalive, expect_continue, upgrade;
    long head_len;
    int64_t content_length;
    long h[HEADER_CAP][4];
};

static long off(const char *p, const char *buf)
{
    if (p == NULL)
        return -1;
    if (p == root_path)
        return -2;
    return (long)(p - buf);
}

static void take(struct snap *s, const char *buf, int r, const struct oribi_request *req)
{
    memset(s, 0, sizeof(*s));
    s->r = r;
    if (r == ORIBI_PARSE_INCOMPLETE)
        return;
    s->status = req->status;
    if (r == ORIBI_PARSE_ERROR && req->status != 417)
        return;
    CHECK(r >= 0 || req->head_len > 0);
    s->method = off(req->method, buf);
    s->method_len = (long)req->method_len;
    s->target = off(req->target, buf);
    s->target_len = (long)req->target_len;
    s->path = off(req->path, buf);
    s->path_len = (long)req->path_len;
    s->minor = req->minor_version;
    s->num_headers = (long)req->num_headers;
    s->host = off(req->host, buf);
    s->host_len = (long)req->host_len;
    s->content_length = req->content_length;
    s->chunked = req->chunked;
    s->keepalive = req->keepalive;
    s->expect_continue = req->expect_continue;
    s->upgrade = req->upgrade;
    s->head_len = (long)req->head_len;
    CHECK(req->num_headers <= HEADER_CAP);
    for (size_t i = 0; i < req->num_headers; i++) {
        s->h[i][0] = off(req->headers[i].name, buf);
        s->h[i][1] = (long)req->headers[i].name_len;
        s->h[i][2] = off(req->headers[i].value, buf);
        s->h[i][3] = (long)req->headers[i].value_len;
    }
    if (r >= 0) {
        CHECK((size_t)r == req->head_len);
        CHECK(req->method_len > 0 && req->target_len > 0 && req->path_len > 0);
    }
}

struct setup {
    struct oribi_limits lim;
    size_t cap;
};

typedef int (*parse_fn)(const char *, size_t, struct oribi_request *, const struct oribi_limits *);

/* One call in a heap block of exactly len bytes. */
static void run(const uint8_t *data, size_t len, size_t last_len, const struct setup *su, parse_fn fn, struct snap *out)
{
    struct oribi_header headers[HEADER_CAP];
    struct oribi_request req;
    char *buf = malloc(len ? len : 1);
    int r;
    memcpy(buf, data, len);
    memset(&req, 0, sizeof(req));
    req.headers = headers;
    req.num_headers = su->cap;
    if (fn) {
        struct oribi_limits lim = su->lim;
        r = fn(buf, len, &req, &lim);
    } else {
        r = oribi_parse_request(buf, len, last_len, &req, &su->lim);
    }
    CHECK(r == ORIBI_PARSE_INCOMPLETE || r == ORIBI_PARSE_ERROR || (r > 0 && (size_t)r <= len));
    if (r == ORIBI_PARSE_ERROR) {
        int st = req.status;
        CHECK(st == 400 || st == 414 || st == 417 || st == 431 || st == 501 || st == 505);
    }
    take(out, buf, r, &req);
    if (r > 0 || (r == ORIBI_PARSE_ERROR && req.status == 417)) {
        /* the head copied (a body grew its buffer): every field at the same
         * offset of the copy, the constant path where it was */
        static struct snap moved;
        char *copy = malloc(len);
        memcpy(copy, buf, len);
        oribi_request_rebase(&req, buf, req.head_len, copy);
        free(buf);
        buf = copy;
        take(&moved, buf, r, &req);
        CHECK(memcmp(&moved, out, sizeof(moved)) == 0);
    }
    free(buf);
}

static size_t cut_points(const uint8_t *lens, size_t n, size_t total, size_t *cuts)
{
    size_t k = 0, at = 0;
    for (size_t i = 0; i < n && at < total; i++) {
        at += (size_t)lens[i] + 1;
        if (at >= total)
            break;
        cuts[k++] = at;
    }
    cuts[k++] = total;
    return k;
}

static void fuzz_parser(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, const struct setup *su)
{
    static struct snap full, inc, one;
    size_t last = 0;

    run(data, size, 0, su, NULL, &full);
    dump("request", full.r, full.status, &full, sizeof(full));
#ifdef HAVE_SSE42_PATH
    if (__builtin_cpu_supports("sse4.2")) {
        static struct snap simd, portable;
        run(data, size, 0, su, parse_sse42, &simd);
        run(data, size, 0, su, parse_portable, &portable);
        CHECK(memcmp(&simd, &portable, sizeof(simd)) == 0);
        CHECK(memcmp(&simd, &full, sizeof(simd)) == 0);
    }
    if (__builtin_cpu_supports("avx2")) {
        static struct snap simd;
        run(data, size, 0, su, parse_avx2, &simd);
        CHECK(memcmp(&simd, &full, sizeof(simd)) == 0);
    }
#endif
#ifdef HAVE_NEON_PATH
    {
        static struct snap simd, portable;
        run(data, size, 0, su, parse_neon, &simd);
        run(data, size, 0, su, parse_portable, &portable);
        CHECK(memcmp(&simd, &portable, sizeof(simd)) == 0);
        CHECK(memcmp(&simd, &full, sizeof(simd)) == 0);
    }
#endif

    for (size_t i = 0; i < ncuts; i++) {
        size_t len = cuts[i];
        run(data, len, last, su, NULL, &inc);
        run(data, len, 0, su, NULL, &one);
        if (one.r != ORIBI_PARSE_INCOMPLETE)
            CHECK(memcmp(&one, &full, sizeof(one)) == 0);
        if (inc.r != ORIBI_PARSE_INCOMPLETE) {
            CHECK(memcmp(&inc, &one, sizeof(inc)) == 0);
            return;
        }
        CHECK(one.r < 0); /* a complete head is never missed */
        last = len;
    }
    /* the input ran out while the resumed parse still waits */
    CHECK(full.r < 0);
    CHECK(!(full.r == ORIBI_PARSE_ERROR && full.status == 414));
}

/* Decodes data[0..size) through one decoder in the given pieces. */
struct chunk_result {
    ssize_t verdict; /* error, incomplete, or 0 when complete */
    char *body, *rest;
    size_t body_len, rest_len;
};

static void decode(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, struct chunk_result *out)
{
    struct oribi_chunked_decoder d;
    size_t from = 0;
    memset(&d, 0, sizeof(d));
    memset(out, 0, sizeof(*out));
    out->body = malloc(size + 1);
    out->rest = malloc(size + 1);
    out->verdict = ORIBI_CHUNKED_INCOMPLETE;
    for (size_t i = 0; i < ncuts; i++) {
        size_t n = cuts[i] - from, got = n;
        char *piece = malloc(n ? n : 1);
        ssize_t r;
        memcpy(piece, data + from, n);
        r = oribi_decode_chunked(&d, piece, &got);
        CHECK(r >= ORIBI_CHUNKED_INCOMPLETE);
        CHECK(got <= n);
        memcpy(out->body + out->body_len, piece, got);
        out->body_len += got;
        if (r >= 0) {
            CHECK(got + (size_t)r <= n);
            memcpy(out->rest, piece + got, (size_t)r);
            memcpy(out->rest + r, data + cuts[i], size - cuts[i]);
            out->rest_len = (size_t)r + size - cuts[i];
        }
        free(piece);
        from = cuts[i];
        if (r != ORIBI_CHUNKED_INCOMPLETE) {
            out->verdict = r < 0 ? r : 0;
            break;
        }
    }
    CHECK(out->body_len + out->rest_len <= size);
}

/* The same pieces through a decoder in discard mode, each in a block of
 * its own size: it must read them without writing. */
static void discard(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, struct chunk_result *out)
{
    struct oribi_chunked_decoder d;
    size_t from = 0;
    memset(&d, 0, sizeof(d));
    memset(out, 0, sizeof(*out));
    out->verdict = ORIBI_CHUNKED_INCOMPLETE;
    for (size_t i = 0; i < ncuts; i++) {
        size_t n = cuts[i] - from, got = (size_t)-1;
        char *piece = malloc(n ? n : 1);
        ssize_t r;
        memcpy(piece, data + from, n);
        r = oribi_discard_chunked(&d, piece, n, &got);
        CHECK(r >= ORIBI_CHUNKED_INCOMPLETE && r <= (ssize_t)n);
        CHECK(got <= n);
        CHECK(memcmp(piece, data + from, n) == 0);
        out->body_len += got;
        free(piece);
        if (r >= 0)
            out->rest_len = n - (size_t)r + size - cuts[i];
        from = cuts[i];
        if (r != ORIBI_CHUNKED_INCOMPLETE) {
            out->verdict = r < 0 ? r : 0;
            break;
        }
    }
}

static void fuzz_chunked(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts)
{
    struct chunk_result whole, split, skipped;
    size_t all = size;
    decode(data, size, &all, 1, &whole);
    decode(data, size, cuts, ncuts, &split);
    discard(data, size, cuts, ncuts, &skipped);
#ifdef ORIBI_FUZZ_DUMP
    uint64_t h = fnv(fnv(0xcbf29ce484222325, whole.body, whole.body_len), whole.rest, whole.rest_len);
    dump("chunked", (long)whole.verdict, (long)whole.body_len, &h, sizeof(h));
#endif
    CHECK(whole.verdict == split.verdict);
    CHECK(whole.body_len == split.body_len);
    CHECK(memcmp(whole.body, split.body, whole.body_len) == 0);
    CHECK(whole.rest_len == split.rest_len);
    CHECK(memcmp(whole.rest, split.rest, whole.rest_len) == 0);
    CHECK(skipped.verdict == split.verdict);
    CHECK(skipped.body_len == split.body_len);
    CHECK(skipped.rest_len == split.rest_len);
    free(whole.body);
    free(whole.rest);
    free(split.body);
    free(split.rest);
}

/* Everything a response parse returns, pointers as offsets (see struct snap). */
struct rsnap {
    long r, minor, status, reason, reason_len, num_headers, framing, keepalive;
    int64_t content_length;
    long h[HEADER_CAP][4];
};

typedef int (*parse_response_fn)(const char *, size_t, int, struct oribi_response_head *);

/* One response parse in a heap block of exactly len bytes; cap (size_t)-1
 * stores no fields. */
static void run_response(const uint8_t *data, size_t len, int head_request, size_t cap, parse_response_fn fn,
                         struct rsnap *out)
{
    struct oribi_header headers[HEADER_CAP];
    struct oribi_response_head res;
    char *buf = malloc(len ? len : 1);
    int r;
    memcpy(buf, data, len);
    memset(&res, 0, sizeof(res));
    res.headers = cap == (size_t)-1 ? NULL : headers;
    res.num_headers = cap == (size_t)-1 ? 0 : cap;
    r = (fn ? fn : oribi_parse_response)(buf, len, head_request, &res);
    memset(out, 0, sizeof(*out));
    out->r = r;
    CHECK(r == ORIBI_PARSE_INCOMPLETE || r == ORIBI_PARSE_ERROR || (r > 0 && (size_t)r <= len));
    if (r > 0) {
        int bodyless = res.status < 200 || res.status == 204 || res.status == 304 || head_request;
        CHECK(res.status >= 100 && res.status <= 599);
        CHECK(res.minor_version == 0 || res.minor_version == 1);
        CHECK(bodyless == (res.framing == ORIBI_FRAMING_NONE));
        CHECK(res.framing != ORIBI_FRAMING_LENGTH || res.content_length >= 0);
        CHECK(res.framing != ORIBI_FRAMING_CHUNKED || res.content_length == -1);
        CHECK(res.framing != ORIBI_FRAMING_UNTIL_CLOSE || !res.keepalive);
        CHECK(res.reason >= buf && res.reason + res.reason_len <= buf + r);
        CHECK(!memchr(res.reason, '\r', res.reason_len) && !memchr(res.reason, '\n', res.reason_len));
        out->minor = res.minor_version;
        out->status = res.status;
        out->reason = off(res.reason, buf);
        out->reason_len = (long)res.reason_len;
        out->content_length = res.content_length;
        out->framing = res.framing;
        out->keepalive = res.keepalive;
        if (res.headers) {
            CHECK(res.num_headers <= cap);
            out->num_headers = (long)res.num_headers;
            for (size_t i = 0; i < res.num_headers; i++) {
                CHECK(headers[i].name_len > 0);
                out->h[i][0] = off(headers[i].name, buf);
                out->h[i][1] = (long)headers[i].name_len;
                out->h[i][2] = off(headers[i].value, buf);
                out->h[i][3] = (long)headers[i].value_len;
            }
        }
    }
    free(buf);
}

static void fuzz_response(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts, int head_request,
                          size_t cap)
{
    static struct rsnap full, other, part;

    run_response(data, size, head_request, cap, NULL, &full);
    dump("response", full.r, full.status, &full, sizeof(full));
#ifdef HAVE_SSE42_PATH
    if (__builtin_cpu_supports("sse4.2")) {
        run_response(data, size, head_request, cap, parse_response_sse42, &other);
        CHECK(memcmp(&other, &full, sizeof(full)) == 0);
        run_response(data, size, head_request, cap, parse_response_portable, &other);
        CHECK(memcmp(&other, &full, sizeof(full)) == 0);
    }
    if (__builtin_cpu_supports("avx2")) {
        run_response(data, size, head_request, cap, parse_response_avx2, &other);
        CHECK(memcmp(&other, &full, sizeof(full)) == 0);
    }
#endif
#ifdef HAVE_NEON_PATH
    run_response(data, size, head_request, cap, parse_response_neon, &other);
    CHECK(memcmp(&other, &full, sizeof(full)) == 0);
    run_response(data, size, head_request, cap, parse_response_portable, &other);
    CHECK(memcmp(&other, &full, sizeof(full)) == 0);
#endif
    /* fields stored or not, the same verdict, unless they overflowed cap */
    run_response(data, size, head_request, (size_t)-1, NULL, &other);
    if (full.r != ORIBI_PARSE_ERROR || other.r == ORIBI_PARSE_ERROR) {
        other.num_headers = full.num_headers;
        memcpy(other.h, full.h, sizeof(full.h));
        CHECK(memcmp(&other, &full, sizeof(full)) == 0);
    }
    /* the head alone is the same head: nothing after it is looked at */
    if (full.r > 0) {
        run_response(data, (size_t)full.r, head_request, cap, NULL, &other);
        CHECK(memcmp(&other, &full, sizeof(full)) == 0);
    }
    for (size_t i = 0; i < ncuts; i++) {
        run_response(data, cuts[i], head_request, cap, NULL, &part);
        if (part.r != ORIBI_PARSE_INCOMPLETE) {
            CHECK(memcmp(&part, &full, sizeof(part)) == 0);
            return;
        }
    }
    CHECK(full.r == ORIBI_PARSE_INCOMPLETE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static size_t cuts[4096];
    struct setup su = {
        {ORIBI_DEFAULT_MAX_REQUEST_LINE, ORIBI_DEFAULT_MAX_HEADER_BYTES, ORIBI_DEFAULT_MAX_HEADERS},
        HEADER_CAP,
    };
    uint8_t flags, lim_a, lim_b;
    size_t n, ncuts;
    const uint8_t *lens;

    if (size < 4)
        return 0;
    flags = data[0];
    lim_a = data[1];
    lim_b = data[2];
    n = data[3] % MAX_PIECES;
    if (size < 4 + n)
        return 0;
    lens = data + 4;
    data += 4 + n;
    size -= 4 + n;

    if (flags & 1) {
        su.lim.max_request_line = 8 + (size_t)lim_a;
        su.lim.max_header_bytes = 8 + (size_t)lim_b;
        su.lim.max_headers = flags >> 4;
    }
    if (flags & 8)
        su.cap = lim_a & 7;

    if ((flags & 2) && size <= 512) {
        for (ncuts = 0; ncuts < size; ncuts++)
            cuts[ncuts] = ncuts + 1;
        if (ncuts == 0)
            cuts[ncuts++] = 0;
    } else {
        ncuts = cut_points(lens, n, size, cuts);
    }

    if ((flags & 12) == 12)
        fuzz_response(data, size, cuts, ncuts, flags >> 4 & 1, flags & 1 ? (size_t)(lim_a & 7) : HEADER_CAP);
    else if (flags & 4)
        fuzz_chunked(data, size, cuts, ncuts);
    else
        fuzz_parser(data, size, cuts, ncuts, &su);
    return 0;
}
