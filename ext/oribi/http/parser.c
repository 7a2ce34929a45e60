/*
 * HTTP/1.1 request-head parser (RFC 9112). See parser.h for the contract.
 *
 * The parse is a single left-to-right pass where every decision depends only
 * on bytes already seen: a prefix of a request either needs more bytes or
 * fails exactly like the whole request would. The fuzzer checks this, and it
 * is what makes the last_len shortcut safe.
 *
 * The hot loops are the byte scanners (field names, request-target, field
 * values). They share one shape: a wide skip over clean bytes (SSE or NEON
 * 16 or AVX2 32 at a time, or 8 at a time in a uint64_t), then a table
 * lookup per byte. On x86-64 the whole parse is instantiated three times,
 * compiled for AVX2, for SSE4.2 and for any CPU, and the CPU picks one at
 * load time so a single build runs everywhere. On aarch64, where NEON is
 * part of the baseline, twice: NEON, and the portable one to test it
 * against.
 */
#include <stdlib.h>
#include <string.h>
#include "http/parser.h"
#include "http/token.h"

#if (defined(__x86_64__) || defined(__i386__)) && !defined(ORIBI_NO_SSE42_BUILD)
#define HAVE_SSE42_PATH 1
#include <immintrin.h>
#define SSE42 __attribute__((target("sse4.2")))
#define AVX2  __attribute__((target("avx2")))
#endif

#if defined(__aarch64__) && !defined(ORIBI_NO_NEON_BUILD)
#define HAVE_NEON_PATH 1
#include <arm_neon.h>
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define unlikely(x)   __builtin_expect(!!(x), 0)

/* RFC 9112 2.2 asks to ignore "at least one" empty line; a few is plenty. */
#define MAX_LEADING_CRLF 8
/* Keeps every head length well inside an int return value. */
#define MAX_LIMIT ((size_t)1 << 28)

/* request-target: anything visible but '#' (no form has a fragment: it is
 * refused rather than passed on for the app to trip over); obs-text passes
 * so UTF-8 paths work. */
static const unsigned char target_tbl[256] = {
    [0x21 ... 0x22] = 1,
    [0x24 ... 0x7e] = 1,
    [0x80 ... 0xff] = 1,
};

/* field-value: VCHAR, SP, HTAB, obs-text. CR is not here: it ends the line. */
static const unsigned char value_tbl[256] = {
    ['\t'] = 1,
    [0x20 ... 0x7e] = 1,
    [0x80 ... 0xff] = 1,
};

/* reg-name bytes of uri-host (RFC 3986 unreserved and sub-delims); '%' is
 * checked apart since it needs two HEXDIG. */
static const unsigned char regname_tbl[256] = {
    ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['-'] = 1, ['.'] = 1,  ['_'] = 1,
    ['~'] = 1,         ['!'] = 1,         ['$'] = 1,         ['&'] = 1, ['\''] = 1, ['('] = 1,
    [')'] = 1,         ['*'] = 1,         ['+'] = 1,         [','] = 1, [';'] = 1,  ['='] = 1,
};

static const unsigned char hex_tbl[256] = {
    ['0' ... '9'] = 1,
    ['A' ... 'F'] = 1,
    ['a' ... 'f'] = 1,
};

/* The path of an absolute-form target with none ("http://h"). */
static const char root_path[] = "/";

/* The instantiations; which one runs is set once by the load-time
 * constructor. */
enum { PATH_PORTABLE, PATH_SSE42, PATH_AVX2, PATH_NEON };
static int path;

#define ONES  0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Skips 8-byte words holding no byte below `below`, no DEL and, in a
 * target (not `value`), no '#'. Exact as a "clean word" test; tabs in
 * values just send their word to the byte loop. */
static ALWAYS_INLINE const char *skip8(const char *p, const char *end, unsigned below, const int value)
{
    while (end - p >= 8) {
        uint64_t v, del, hash;
        memcpy(&v, p, 8);
        del = v ^ (0x7f * ONES);
        hash = v ^ ('#' * ONES);
        if (((v - below * ONES) & ~v & HIGHS) | ((del - ONES) & ~del & HIGHS) |
            (value ? 0 : (hash - ONES) & ~hash & HIGHS))
            break;
        p += 8;
    }
    return p;
}

#if defined(HAVE_SSE42_PATH) || defined(HAVE_NEON_PATH)
/* oribi_tchar as two nibble lookups: the low nibble's entry has bit h - 2
 * set when (h << 4 | low nibble) is a tchar, h in 2..7; the high nibble's
 * entry is that bit (none for 0x00..0x1f and 0x80..0xff). A byte is a tchar
 * when the two entries share a bit. The fuzzer checks this against the
 * table through the portable path. */
static const char tchar_by_low[16] = {0x3a, 0x3f, 0x3e, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f,
                                      0x3e, 0x3e, 0x3d, 0x15, 0x34, 0x15, 0x3d, 0x1c};
static const char tchar_by_high[16] = {0, 0, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20};

/* regname_tbl the same way (its bytes are all in 0x21..0x7e too). */
static const char regname_by_low[16] = {0x2a, 0x3f, 0x3e, 0x3e, 0x3f, 0x3e, 0x3f, 0x3f,
                                        0x3f, 0x3f, 0x3d, 0x17, 0x15, 0x17, 0x35, 0x1c};

#endif

#ifdef HAVE_SSE42_PATH
/* Bit i set when byte i of b may stop a scan: a CTL, SP and '#' outside a
 * field value, or DEL. HTAB, the one CTL a value holds, is taken out only
 * when a block has a candidate (tabs16): two compares fewer on every clean
 * block.
 * Plain compares: on current cores they are several times cheaper than
 * one PCMPESTRI. */
SSE42 static inline unsigned stops16(__m128i b, const int value)
{
    const __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(b, _mm_set1_epi8(value ? 0x1f : 0x20)), b);
    __m128i stop = _mm_or_si128(ctl, _mm_cmpeq_epi8(b, _mm_set1_epi8(0x7f)));
    if (!value)
        stop = _mm_or_si128(stop, _mm_cmpeq_epi8(b, _mm_set1_epi8('#')));
    return (unsigned)_mm_movemask_epi8(stop);
}

SSE42 static inline unsigned tabs16(__m128i b)
{
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(b, _mm_set1_epi8('\t')));
}

AVX2 static inline unsigned stops32(__m256i b, const int value)
{
    const __m256i ctl = _mm256_cmpeq_epi8(_mm256_min_epu8(b, _mm256_set1_epi8(value ? 0x1f : 0x20)), b);
    __m256i stop = _mm256_or_si256(ctl, _mm256_cmpeq_epi8(b, _mm256_set1_epi8(0x7f)));
    if (!value)
        stop = _mm256_or_si256(stop, _mm256_cmpeq_epi8(b, _mm256_set1_epi8('#')));
    return (unsigned)_mm256_movemask_epi8(stop);
}

AVX2 static inline unsigned tabs32(__m256i b)
{
    return (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, _mm256_set1_epi8('\t')));
}

/* Bit i set when p[i] is outside the set the two nibble tables give. */
SSE42 static inline unsigned outside16(const char *p, const char *by_low)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)p), nibble = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)by_low), _mm_and_si128(b, nibble));
    const __m128i hi =
        _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)tchar_by_high), _mm_and_si128(_mm_srli_epi16(b, 4), nibble));
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(lo, hi), _mm_setzero_si128()));
}

#define nontchar16(p) outside16(p, tchar_by_low)

/* The first byte in [p, end) that is not a reg-name byte, or end, while 16
 * bytes can be read before `limit` (>= end); else where the bytes ran out.
 * Called through the out-of-line copies below, one per path: AVX2 code
 * calling legacy-encoded SSE pays a state transition on some cores. */
static ALWAYS_INLINE const char *skip_regname(const char *p, const char *end, const char *limit)
{
    for (; limit - p >= 16; p += 16) {
        unsigned m = outside16(p, regname_by_low);
        if (m)
            return p + __builtin_ctz(m) < end ? p + __builtin_ctz(m) : end;
        if (end - p <= 16)
            return end;
    }
    return p;
}

SSE42 __attribute__((noinline)) static const char *skip_regname_sse42(const char *p, const char *end, const char *limit)
{
    return skip_regname(p, end, limit);
}

AVX2 __attribute__((noinline)) static const char *skip_regname_avx2(const char *p, const char *end, const char *limit)
{
    return skip_regname(p, end, limit);
}

/* Returns the first stop byte, or where fewer than 16 bytes remain. */
SSE42 static inline const char *skip16(const char *p, const char *end, const int value)
{
    if (end - p < 16)
        return p;
    const char *last = end - 16; /* the loop's one test */
    do {
        const __m128i b = _mm_loadu_si128((const __m128i *)p);
        unsigned m = stops16(b, value);
        if (m && value)
            m &= ~tabs16(b);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    } while (p <= last);
    return p;
}

AVX2 static inline const char *skip32(const char *p, const char *end, const int value)
{
    if (end - p >= 32) {
        const char *last = end - 32; /* the loop's one test */
        do {
            const __m256i b = _mm256_loadu_si256((const __m256i *)p);
            unsigned m = stops32(b, value);
            if (m && value)
                m &= ~tabs32(b);
            if (m)
                return p + __builtin_ctz(m);
            p += 32;
        } while (p <= last);
    }
    return skip16(p, end, value);
}
#endif

#ifdef HAVE_NEON_PATH
/* NEON has no movemask: a compare's 16 bytes (0x00 or 0xff each) narrowed
 * to 4 bits each make a 64-bit mask, byte i in bits 4i..4i+3, so the first
 * set byte is ctz / 4. The same contract as the SSE4.2 functions above. */
static inline uint64_t mask16_neon(uint8x16_t m)
{
    return vget_lane_u64(vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(m), 4)), 0);
}

#define first_neon(m) ((unsigned)__builtin_ctzll(m) >> 2)

static inline uint64_t stops16_neon(uint8x16_t b, const int value)
{
    uint8x16_t stop = vorrq_u8(vcleq_u8(b, vdupq_n_u8(value ? 0x1f : 0x20)), vceqq_u8(b, vdupq_n_u8(0x7f)));
    if (!value)
        stop = vorrq_u8(stop, vceqq_u8(b, vdupq_n_u8('#')));
    return mask16_neon(stop);
}

static inline uint64_t tabs16_neon(uint8x16_t b)
{
    return mask16_neon(vceqq_u8(b, vdupq_n_u8('\t')));
}

/* Byte i's nibble set when p[i] is outside the set the two nibble tables
 * give (TBL, like PSHUFB, looks up 16 entries by the low 4 bits). */
static inline uint64_t outside16_neon(const char *p, const char *by_low)
{
    const uint8x16_t b = vld1q_u8((const uint8_t *)p);
    const uint8x16_t lo = vqtbl1q_u8(vld1q_u8((const uint8_t *)by_low), vandq_u8(b, vdupq_n_u8(0x0f)));
    const uint8x16_t hi = vqtbl1q_u8(vld1q_u8((const uint8_t *)tchar_by_high), vshrq_n_u8(b, 4));
    return mask16_neon(vceqq_u8(vandq_u8(lo, hi), vdupq_n_u8(0)));
}

#define nontchar16_neon(p) outside16_neon(p, tchar_by_low)

static const char *skip_regname_neon(const char *p, const char *end, const char *limit)
{
    for (; limit - p >= 16; p += 16) {
        uint64_t m = outside16_neon(p, regname_by_low);
        if (m)
            return p + first_neon(m) < end ? p + first_neon(m) : end;
        if (end - p <= 16)
            return end;
    }
    return p;
}

static inline const char *skip16_neon(const char *p, const char *end, const int value)
{
    if (end - p < 16)
        return p;
    const char *last = end - 16; /* the loop's one test */
    do {
        const uint8x16_t b = vld1q_u8((const uint8_t *)p);
        uint64_t m = stops16_neon(b, value);
        if (m && value)
            m &= ~tabs16_neon(b);
        if (m)
            return p + first_neon(m);
        p += 16;
    } while (p <= last);
    return p;
}
#endif

/* Returns the first byte in [p, end) that `ok` refuses, or end; `value`
 * says which set `ok` is (field value, else request-target). */
static ALWAYS_INLINE const char *scan(const char *p, const char *end, const unsigned char *ok, unsigned below,
                                      const int value, const int level)
{
#ifdef HAVE_SSE42_PATH
    if (level) {
        p = level == PATH_AVX2 ? skip32(p, end, value) : skip16(p, end, value);
        if (end - p >= 16)
            return p; /* the compares are exact: this is the stop byte */
    }
#elif defined(HAVE_NEON_PATH)
    if (level) {
        p = skip16_neon(p, end, value);
        if (end - p >= 16)
            return p; /* the compares are exact: this is the stop byte */
    }
#else
    (void)value, (void)level;
#endif
    for (;;) {
        const char *stop;
        p = skip8(p, end, below, value);
        stop = end - p > 8 ? p + 8 : end;
        while (p != stop && ok[(unsigned char)*p])
            p++;
        if (p != stop || p == end)
            return p;
    }
}

#define scan_target(p, end, level) scan(p, end, target_tbl, 0x21, 0, level)
#define scan_value(p, end, level)  scan(p, end, value_tbl, 0x20, 1, level)

/* Returns the first byte in [p, end) that is not a tchar, or end. */
static ALWAYS_INLINE const char *scan_token(const char *p, const char *end, const int level)
{
#ifdef HAVE_SSE42_PATH
    if (level && end - p >= 16) {
        const char *last = end - 16; /* the loop's one test */
        do {
            unsigned m = nontchar16(p);
            if (m)
                return p + __builtin_ctz(m);
            p += 16;
        } while (p <= last);
    }
#elif defined(HAVE_NEON_PATH)
    if (level && end - p >= 16) {
        const char *last = end - 16; /* the loop's one test */
        do {
            uint64_t m = nontchar16_neon(p);
            if (m)
                return p + first_neon(m);
            p += 16;
        } while (p <= last);
    }
#else
    (void)level;
#endif
    while (p != end && oribi_tchar[(unsigned char)*p])
        p++;
    return p;
}

/* A field name: the first byte in [p, end) that is not a tchar, or end.
 * In a 16-byte block holding the colon the address of what follows hangs
 * on one compare with ':' alone; that no other byte before it stops the
 * name is checked beside it, off that chain. */
static ALWAYS_INLINE const char *scan_name(const char *p, const char *end, const int level)
{
#ifdef HAVE_SSE42_PATH
    if (level && end - p >= 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)p);
        const unsigned colon = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(b, _mm_set1_epi8(':')));
        const unsigned bad = nontchar16(p);
        if (colon && !(bad & ((colon & -colon) - 1)))
            return p + __builtin_ctz(colon);
    }
#elif defined(HAVE_NEON_PATH)
    if (level && end - p >= 16) {
        const uint64_t colon = mask16_neon(vceqq_u8(vld1q_u8((const uint8_t *)p), vdupq_n_u8(':')));
        const uint64_t bad = nontchar16_neon(p);
        /* a byte's 4 bits are all set or all clear: colon & -colon is the
         * first colon's lowest bit, and below it the bytes before it */
        if (colon && !(bad & ((colon & -colon) - 1)))
            return p + first_neon(colon);
    }
#endif
    return scan_token(p, end, level);
}

static ALWAYS_INLINE uint64_t load64(const char *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
    return v;
}

static ALWAYS_INLINE uint32_t load32(const char *s)
{
    uint32_t v;
    memcpy(&v, s, 4);
    return v;
}

/* Case-insensitive compare against a lowercase literal of the same length,
 * a word at a time (overlapping at the end). OR-ing 0x20 into a byte
 * lowercases a letter and maps nothing else onto a byte of a literal here
 * (lowercase letters, digits, '-', ':', '/': 0x20 is set in all of them)
 * but a CTL below 0x20, which none of the strings compared can hold: names,
 * tokens and targets are free of CTLs, field values of all but HTAB, which
 * becomes ')'. */
static ALWAYS_INLINE int ieq(const char *s, const char *lit, size_t n)
{
    if (n >= 8) {
        uint64_t d = 0;
        for (size_t i = 0; i + 8 < n; i += 8)
            d |= (load64(s + i) | 0x2020202020202020ULL) ^ load64(lit + i);
        return !(d | ((load64(s + n - 8) | 0x2020202020202020ULL) ^ load64(lit + n - 8)));
    }
    if (n >= 4)
        return !(((load32(s) | 0x20202020u) ^ load32(lit)) | ((load32(s + n - 4) | 0x20202020u) ^ load32(lit + n - 4)));
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] | 0x20) != (unsigned char)lit[i])
            return 0;
    return 1;
}

#define IS(s, n, lit) ((n) == sizeof(lit) - 1 && ieq(s, lit, sizeof(lit) - 1))
#define OWS(c)        ((c) == ' ' || (c) == '\t')

/* The inside of an IP-literal: IPv6 characters only (HEXDIG, ':', '.' of
 * an embedded IPv4), with the two colons every IPv6 address has. A reg-name
 * in brackets ("[evil.com]"), IPvFuture and zone ids are refused: they name
 * no address a server is reached at, and an app or cache keyed on the Host
 * would take them as a host. Returns the ']' or NULL. */
static const char *ip_literal_end(const char *p, const char *end)
{
    int colons = 0;
    for (; p != end && (hex_tbl[(unsigned char)*p] || *p == ':' || *p == '.'); p++)
        colons += *p == ':';
    return p != end && *p == ']' && colons >= 2 ? p : NULL;
}

/* uri-host [ ":" port ] (RFC 3986). Userinfo, paths, spaces and non-ASCII
 * hosts are refused: they are how Host confusion attacks start. A port
 * without a host (":80") is refused even where the host may be empty: the
 * empty Host of RFC 9112 3.2 is an empty field value. On the SIMD paths
 * (level), bytes up to `limit` may be read, for a 16-byte skip. */
static ALWAYS_INLINE int valid_authority(const char *p, const char *end, int need_host, int need_port,
                                         const char *limit, int level)
{
    const char *h = p;
    if (p != end && *p == '[') {
        if (!(p = ip_literal_end(p + 1, end)))
            return 0;
        p++;
    } else {
        for (;;) {
#ifdef HAVE_SSE42_PATH
            if (level)
                p = (level == PATH_AVX2 ? skip_regname_avx2 : skip_regname_sse42)(p, end, limit);
#elif defined(HAVE_NEON_PATH)
            if (level)
                p = skip_regname_neon(p, end, limit);
#else
            (void)limit, (void)level;
#endif
            while (p != end && regname_tbl[(unsigned char)*p])
                p++;
            if (p == end || *p != '%')
                break;
            if (end - p < 3 || !hex_tbl[(unsigned char)p[1]] || !hex_tbl[(unsigned char)p[2]])
                return 0;
            p += 3;
        }
    }
    if (p == h && (need_host || p != end))
        return 0;
    if (p == end)
        return !need_port;
    if (*p++ != ':')
        return 0;
    if (need_port && p == end)
        return 0;
    while (p != end && (unsigned)(*p - '0') <= 9u)
        p++;
    return p == end;
}

/* What the semantic fields said, folded while the fields go by. */
struct sem {
    const char *host;
    size_t host_len;
    int64_t content_length;
    int host_fields;
    int te_seen, te_chunked, te_unknown;
    int te_last_chunked; /* response: the final coding is chunked */
    int conn_close, conn_keepalive, conn_upgrade, upgrade_field;
    int expect_continue, expect_other;
};

/* Transfer-Encoding: #transfer-coding, folded over every TE field. Framing
 * ambiguity is 400 (RFC 9112 6.3); a coding we cannot decode is 501. */
static int parse_te(const char *p, const char *end, struct sem *s)
{
    int elems = 0;
    s->te_seen = 1;
    for (;;) {
        const char *tok;
        int is_chunked;
        while (p != end && (OWS(*p) || *p == ','))
            p++;
        if (p == end)
            return elems ? 0 : 400;
        for (tok = p; p != end && oribi_tchar[(unsigned char)*p]; p++)
            ;
        if (p == tok)
            return 400;
        is_chunked = IS(tok, (size_t)(p - tok), "chunked");
        while (p != end && OWS(*p))
            p++;
        elems++;
        if (s->te_chunked)
            return 400; /* chunked must be the last coding, and only once */
        if (p != end && *p == ';') {
            /* parameters: unknown to us whatever the name, and the rest of
             * the field may hide commas in quoted strings, so stop here */
            s->te_unknown = 1;
            return 0;
        }
        if (p != end && *p != ',')
            return 400;
        if (is_chunked)
            s->te_chunked = 1;
        else
            s->te_unknown = 1;
    }
}

/* Connection: #connection-option */
static int parse_connection(const char *p, const char *end, struct sem *s)
{
    for (;;) {
        const char *tok;
        size_t n;
        while (p != end && (OWS(*p) || *p == ','))
            p++;
        if (p == end)
            return 0;
        for (tok = p; p != end && oribi_tchar[(unsigned char)*p]; p++)
            ;
        if (p == tok)
            return 400;
        n = (size_t)(p - tok);
        while (p != end && OWS(*p))
            p++;
        if (p != end && *p != ',')
            return 400;
        if (IS(tok, n, "close"))
            s->conn_close = 1;
        else if (IS(tok, n, "keep-alive"))
            s->conn_keepalive = 1;
        else if (IS(tok, n, "upgrade"))
            s->conn_upgrade = 1;
    }
}

/* Content-Length: 1*DIGIT and nothing else; 18 digits cannot overflow
 * int64. Leading zeros add nothing to the value, so only the digits after
 * them count (nginx reads "0000000000000005" as 5; max_header_bytes bounds
 * the padding). Repeats must agree, or the framing is ambiguous. */
static int parse_content_length(const char *v, size_t vlen, struct sem *s)
{
    int64_t n = 0;
    size_t i = 0;
    if (vlen == 0)
        return 400;
    while (i < vlen && v[i] == '0')
        i++;
    if (vlen - i > 18)
        return 400;
    for (; i < vlen; i++) {
        unsigned d = (unsigned char)v[i] - '0';
        if (d > 9)
            return 400;
        n = n * 10 + d;
    }
    if (s->content_length >= 0 && s->content_length != n)
        return 400;
    s->content_length = n;
    return 0;
}

/* The names semantic_field() looks at, by length: their first four bytes,
 * lowercase (no entry: zeros, which no name matches). Bytes, not strings:
 * a four-letter literal would not hold its NUL, which newer compilers warn
 * of. */
static const char semantic_names[18][4] = {
    [4] = {'h', 'o', 's', 't'},  [6] = {'e', 'x', 'p', 'e'},  [7] = {'u', 'p', 'g', 'r'},
    [10] = {'c', 'o', 'n', 'n'}, [14] = {'c', 'o', 'n', 't'}, [17] = {'t', 'r', 'a', 'n'}};

/* Returns 0 or the status to fail with. */
static ALWAYS_INLINE int semantic_field(const char *name, size_t name_len, const char *v, size_t vlen, struct sem *s,
                                        const char *limit, int level)
{
    switch (name_len) {
    case 4:
        if (!ieq(name, "host", 4))
            return 0;
        if (s->host_fields++ || !valid_authority(v, v + vlen, 0, 0, limit, level))
            return 400;
        s->host = v;
        s->host_len = vlen;
        return 0;
    case 6:
        if (!ieq(name, "expect", 6))
            return 0;
        if (IS(v, vlen, "100-continue"))
            s->expect_continue = 1;
        else
            s->expect_other = 1;
        return 0;
    case 7:
        if (ieq(name, "upgrade", 7))
            s->upgrade_field = 1;
        return 0;
    case 10:
        if (!ieq(name, "connection", 10))
            return 0;
        if (IS(v, vlen, "keep-alive")) /* the usual whole value, a token alone */
            return s->conn_keepalive = 1, 0;
        return parse_connection(v, v + vlen, s);
    case 14:
        return ieq(name, "content-length", 14) ? parse_content_length(v, vlen, s) : 0;
    case 17:
        return ieq(name, "transfer-encoding", 17) ? parse_te(v, v + vlen, s) : 0;
    }
    return 0;
}

/* Transfer-Encoding of a response (RFC 9112 6.3): chunked as the final
 * coding frames the body; any other final coding leaves it running until
 * the server closes. Codings are only skipped over, never decoded, so their
 * parameters are too (up to the next comma). */
static int parse_response_te(const char *p, const char *end, struct sem *s)
{
    for (;;) {
        const char *tok;
        while (p != end && (OWS(*p) || *p == ','))
            p++;
        if (p == end)
            return 0;
        for (tok = p; p != end && oribi_tchar[(unsigned char)*p]; p++)
            ;
        if (p == tok)
            return 400;
        s->te_seen = 1;
        s->te_last_chunked = IS(tok, (size_t)(p - tok), "chunked");
        while (p != end && OWS(*p))
            p++;
        if (p != end && *p == ';')
            while (p != end && *p != ',')
                p++;
        if (p != end && *p != ',')
            return 400;
    }
}

/* The names response_field() looks at, as semantic_names. */
static const char response_names[18][4] = {
    [10] = {'c', 'o', 'n', 'n'}, [14] = {'c', 'o', 'n', 't'}, [17] = {'t', 'r', 'a', 'n'}};

/* Returns 0 or 400 (the response cannot be framed). */
static int response_field(const char *name, size_t name_len, const char *v, size_t vlen, struct sem *s)
{
    switch (name_len) {
    case 10:
        return ieq(name, "connection", 10) ? parse_connection(v, v + vlen, s) : 0;
    case 14:
        return ieq(name, "content-length", 14) ? parse_content_length(v, vlen, s) : 0;
    case 17:
        return ieq(name, "transfer-encoding", 17) ? parse_response_te(v, v + vlen, s) : 0;
    }
    return 0;
}

/* Where fields go: headers[0..cap), num of them once parsed. */
struct fields {
    struct oribi_header *headers; /* NULL: none stored (responses only) */
    size_t cap, num;
};

/* Reads header fields from *pp through the empty line that ends them; hend
 * is the end of the input or, when capped, the size limit. Returns 0 with
 * *pp past the empty line, ORIBI_PARSE_INCOMPLETE, or the status to fail
 * with (400, 431, or one from a semantic field). `response` is a constant
 * at each call: it picks which fields carry framing semantics. */
static ALWAYS_INLINE int parse_fields(const char **pp, const char *hend, int capped, struct fields *f, struct sem *s,
                                      const int response, const int level)
{
    /* locals, not f->: a store into headers[] could alias them and force
     * a reload per field */
    struct oribi_header *headers = f->headers;
    const size_t cap = f->cap;
    size_t num = 0;
    const char *p = *pp;
    const char(*const names)[4] = response ? response_names : semantic_names;
#define OUT_OF_FIELDS() return capped ? 431 : ORIBI_PARSE_INCOMPLETE

    for (;;) {
        const char *name, *value, *vend;
        size_t name_len;
        int st;
        if (p == hend)
            OUT_OF_FIELDS();
        if (*p == '\r') {
            if (p + 1 == hend)
                OUT_OF_FIELDS();
            if (p[1] != '\n')
                return 400;
            *pp = p + 2;
            f->num = num;
            return 0;
        }
        /* refuses bare LF, obs-fold / leading whitespace, empty names, CTLs */
        if (!oribi_tchar[(unsigned char)*p])
            return 400;
        if (num == cap)
            return 431;
        name = p;
        p = scan_name(p + 1, hend, level);
        if (unlikely(p == hend || *p != ':')) {
            if (p == hend)
                OUT_OF_FIELDS();
            return 400; /* includes whitespace before the colon */
        }
        name_len = (size_t)(p - name);
        value = ++p;
        p = scan_value(p, hend, level);
        /* the usual CRLF in one compare, each way it can be wrong apart */
        if (unlikely(hend - p < 2 || p[0] != '\r' || p[1] != '\n')) {
            if (p == hend)
                OUT_OF_FIELDS();
            if (*p != '\r')
                return 400; /* bare LF, NUL, other CTLs, DEL */
            if (p + 1 == hend)
                OUT_OF_FIELDS();
            return 400; /* bare CR */
        }
        /* OWS around the value: the scan let only SP and HTAB through of the
         * bytes up to ' ' */
        value += *value == ' '; /* the usual one SP (at worst *value is the CR) */
        vend = p;
        /* more OWS, or an empty value (then *value is the CR): trim byte by
         * byte; p[-1] is read only once *value shows the value has a byte */
        if (unlikely((unsigned char)*value <= ' ' || (unsigned char)p[-1] <= ' ')) {
            while (value != p && (unsigned char)*value <= ' ')
                value++;
            for (; vend != value && (unsigned char)vend[-1] <= ' '; vend--)
                ;
        }
        p += 2;
        if (!response || headers) {
            headers[num].name = name;
            headers[num].name_len = name_len;
            headers[num].value = value;
            headers[num].value_len = (size_t)(vend - value);
        }
        /* only names as long as one we care about, and starting alike, go
         * through the compare */
        if (name_len - 4 < 14 && (load32(name) | 0x20202020u) == load32(names[name_len])) {
            st = response ? response_field(name, name_len, value, (size_t)(vend - value), s)
                          : semantic_field(name, name_len, value, (size_t)(vend - value), s, hend, level);
            if (st)
                return st;
        }
        num++;
    }
#undef OUT_OF_FIELDS
}

#define FAIL(code)                \
    do {                          \
        req->status = (code);     \
        return ORIBI_PARSE_ERROR; \
    } while (0)
/* Running out of bytes at a limit means the limit is exceeded; before it,
 * the head is just not all here yet. */
#define OUT_OF(capped, code)           \
    do {                               \
        if (capped)                    \
            FAIL(code);                \
        return ORIBI_PARSE_INCOMPLETE; \
    } while (0)

static ALWAYS_INLINE int parse_head(const char *buf, size_t len, struct oribi_request *req,
                                    const struct oribi_limits *lim, const int level)
{
    const char *p = buf, *buf_end = buf + len;
    const char *rl_start, *rl_end, *hdr_start, *hend, *target_end, *version;
    const char *abs_host = NULL;
    size_t abs_host_len = 0;
    int connect = 0;
    int rl_capped, h_capped, leading = 0, minor, st;
    struct fields f = {0};
    struct sem s = {0};
    s.content_length = -1;

    while (p != buf_end && *p == '\r') {
        if (p + 1 == buf_end)
            return ORIBI_PARSE_INCOMPLETE;
        if (p[1] != '\n' || ++leading > MAX_LEADING_CRLF)
            FAIL(400);
        p += 2;
    }

    /* request-line: the LF must come within max_request_line bytes */
    rl_start = p;
    rl_capped = (size_t)(buf_end - rl_start) >= lim->max_request_line;
    rl_end = rl_capped ? rl_start + lim->max_request_line : buf_end;

    p = scan_token(p, rl_end, level);
    if (p == rl_end)
        OUT_OF(rl_capped, 414);
    if (p == rl_start || *p != ' ')
        FAIL(400);
    req->method = rl_start;
    req->method_len = (size_t)(p - rl_start);
    req->target = ++p;
    p = scan_target(p, rl_end, level);
    if (p == rl_end)
        OUT_OF(rl_capped, 414);
    if (p == req->target || *p != ' ')
        FAIL(400);
    target_end = p++;
    req->target_len = (size_t)(target_end - req->target);

    /* "HTTP/" DIGIT "." DIGIT CRLF: HTTP/1.1 or 1.0 whole in one compare,
     * else checked byte by byte as it arrives */
    version = p;
    if (rl_end - p >= 10 && memcmp(p, "HTTP/1.", 7) == 0 && (p[7] == '1' || p[7] == '0') && p[8] == '\r' &&
        p[9] == '\n') {
        p += 10;
    } else {
        for (int i = 0; i < 10; i++, p++) {
            static const char shape[] = "HTTP/0.0\r\n";
            if (p == rl_end)
                OUT_OF(rl_capped, 414);
            if (i == 5 || i == 7 ? (unsigned)((unsigned char)*p - '0') > 9u : *p != shape[i])
                FAIL(400);
        }
    }
    if (version[5] != '1')
        FAIL(505);
    minor = version[7] == '0' ? 0 : 1;
    req->minor_version = minor;

    /* request-target forms (RFC 9112 3.2); method names are case-sensitive.
     * None has a fragment: the scan above stopped at a '#'. */
    req->path = req->target;
    req->path_len = req->target_len;
    if (req->method_len == 7 && memcmp(req->method, "CONNECT", 7) == 0) {
        connect = 1;
        if (!valid_authority(req->target, target_end, 1, 1, rl_end, level))
            FAIL(400);
    } else if (req->target[0] == '/') {
        /* origin-form */
    } else if (req->target_len == 1 && req->target[0] == '*') {
        if (req->method_len != 7 || memcmp(req->method, "OPTIONS", 7) != 0)
            FAIL(400);
    } else {
        const char *a = req->target, *ae;
        if (req->target_len > 7 && ieq(a, "http://", 7))
            a += 7;
        else if (req->target_len > 8 && ieq(a, "https://", 8))
            a += 8;
        else
            FAIL(400);
        for (ae = a; ae != target_end && *ae != '/' && *ae != '?'; ae++)
            ;
        /* an http(s) URI with an empty host is invalid (RFC 9110 4.2.1) */
        if (!valid_authority(a, ae, 1, 0, rl_end, level))
            FAIL(400);
        abs_host = a;
        abs_host_len = (size_t)(ae - a);
        if (ae == target_end) {
            req->path = root_path;
            req->path_len = 1;
        } else {
            req->path = ae;
            req->path_len = (size_t)(target_end - ae);
        }
    }

    /* header section: the final LF must come within max_header_bytes */
    hdr_start = p;
    h_capped = (size_t)(buf_end - hdr_start) >= lim->max_header_bytes;
    hend = h_capped ? hdr_start + lim->max_header_bytes : buf_end;
    f.headers = req->headers;
    f.cap = req->num_headers < lim->max_headers ? req->num_headers : lim->max_headers;
    st = parse_fields(&p, hend, h_capped, &f, &s, 0, level);
    if (st == ORIBI_PARSE_INCOMPLETE)
        return st;
    if (st)
        FAIL(st);

    /* Checks that need the whole head. Framing errors (400) come before 501,
     * and 417 last: it is the one error after which the connection can go on,
     * so it may only be answered once the body framing is known to be sound. */
    /* No Host field: 400 in HTTP/1.1 (RFC 9112 3.2), and in HTTP/1.0 too
     * when the target is absolute. A proxy in front matches its rules on
     * the Host field and forwards an absolute target unchanged, so an
     * authority it never looked at must not name the host. */
    if (!s.host && (minor == 1 || abs_host))
        FAIL(400);
    if (abs_host) {
        s.host = abs_host;
        s.host_len = abs_host_len;
    }
    if (s.te_seen && (minor == 0 || s.content_length >= 0))
        FAIL(400);
    /* A CONNECT has no content (RFC 9110 9.3.6): what follows its head is
     * the tunnel's. A length on one is framing that a proxy in front may
     * read otherwise, the very disagreement smuggling lives on. */
    if (connect && (s.te_seen || s.content_length > 0))
        FAIL(400);
    req->host = s.host;
    req->host_len = s.host_len;
    req->content_length = s.content_length;
    req->chunked = s.te_seen;
    /* After a CONNECT the connection is a tunnel (the app hijacks it) or
     * over: never another request, whatever the answer (417 included). */
    req->keepalive = !connect && !s.conn_close && (minor == 1 || s.conn_keepalive);
    /* RFC 9110 10.1.1: 100-continue in an HTTP/1.0 request is ignored */
    req->expect_continue = s.expect_continue && minor == 1;
    /* Upgrade is HTTP/1.1 only (RFC 9110 7.8): an HTTP/1.0 one asks nothing */
    req->upgrade = s.conn_upgrade && s.upgrade_field && minor == 1;
    req->num_headers = f.num;
    req->head_len = (size_t)(p - buf);
    if (s.te_unknown)
        FAIL(501);
    if (s.expect_other)
        FAIL(417);
    req->status = 0;
    return (int)(p - buf);
}

/* Status-line, header fields and body framing of a response; the same
 * single pass over bytes already seen as the request head. */
static ALWAYS_INLINE int parse_response_head(const char *buf, size_t len, int head_request,
                                             struct oribi_response_head *res, const int level)
{
    static const char shape[] = "HTTP/1.x 000";
    const int capped = len > MAX_LIMIT;
    const char *p = buf, *end = capped ? buf + MAX_LIMIT : buf + len;
    struct fields f = {res->headers, res->headers ? res->num_headers : (size_t)-1, 0};
    struct sem s = {0};
    int status, minor, st, framing;
    s.content_length = -1;
#define RESPONSE_OUT_OF() return capped ? ORIBI_PARSE_ERROR : ORIBI_PARSE_INCOMPLETE

    /* "HTTP/1." [01] SP 3DIGIT, refused at the first byte that cannot fit */
    for (int i = 0; i < 12; i++, p++) {
        unsigned char c;
        if (p == end)
            RESPONSE_OUT_OF();
        c = (unsigned char)*p;
        if (i == 7 ? c != '0' && c != '1' : i > 8 ? (unsigned)(c - '0') > 9u : c != shape[i])
            return ORIBI_PARSE_ERROR;
    }
    minor = buf[7] - '0';
    status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (status < 100 || status > 599)
        return ORIBI_PARSE_ERROR;

    /* [ SP reason-phrase ] CRLF: the SP before an empty reason is often
     * missing, and costs nothing to accept */
    if (p == end)
        RESPONSE_OUT_OF();
    res->reason = p;
    if (*p == ' ') {
        res->reason = ++p;
        p = scan_value(p, end, level);
        if (p == end)
            RESPONSE_OUT_OF();
    }
    res->reason_len = (size_t)(p - res->reason);
    if (*p != '\r')
        return ORIBI_PARSE_ERROR;
    if (++p == end)
        RESPONSE_OUT_OF();
    if (*p++ != '\n')
        return ORIBI_PARSE_ERROR;

    st = parse_fields(&p, end, capped, &f, &s, 1, level);
    if (st == ORIBI_PARSE_INCOMPLETE)
        return st;
    if (st)
        return ORIBI_PARSE_ERROR;
#undef RESPONSE_OUT_OF

    /* RFC 9112 6.3, in its order: no body whatever the fields say, then
     * Transfer-Encoding over Content-Length, then until the close */
    if (status < 200 || status == 204 || status == 304 || head_request)
        framing = ORIBI_FRAMING_NONE;
    else if (s.te_seen)
        framing = s.te_last_chunked ? ORIBI_FRAMING_CHUNKED : ORIBI_FRAMING_UNTIL_CLOSE;
    else if (s.content_length >= 0)
        framing = ORIBI_FRAMING_LENGTH;
    else
        framing = ORIBI_FRAMING_UNTIL_CLOSE;
    res->minor_version = minor;
    res->status = status;
    res->num_headers = f.num;
    res->content_length = s.te_seen ? -1 : s.content_length;
    res->framing = framing;
    /* a coding the client does not know ends the body at the close even
     * where there is no body (HEAD): the connection cannot carry on */
    res->keepalive = !s.conn_close && (minor == 1 || s.conn_keepalive) && framing != ORIBI_FRAMING_UNTIL_CLOSE &&
                     !(s.te_seen && !s.te_last_chunked);
    return (int)(p - buf);
}

#ifdef HAVE_SSE42_PATH
AVX2 static int parse_avx2(const char *buf, size_t len, struct oribi_request *req, const struct oribi_limits *lim)
{
    return parse_head(buf, len, req, lim, PATH_AVX2);
}

SSE42 static int parse_sse42(const char *buf, size_t len, struct oribi_request *req, const struct oribi_limits *lim)
{
    return parse_head(buf, len, req, lim, PATH_SSE42);
}
#endif

#ifdef HAVE_NEON_PATH
static int parse_neon(const char *buf, size_t len, struct oribi_request *req, const struct oribi_limits *lim)
{
    return parse_head(buf, len, req, lim, PATH_NEON);
}
#endif

static int parse_portable(const char *buf, size_t len, struct oribi_request *req, const struct oribi_limits *lim)
{
    return parse_head(buf, len, req, lim, PATH_PORTABLE);
}

/* The head can only be complete once an empty line has arrived. Bare-LF
 * endings count too, so that such a head gets its 400 now instead of a
 * timeout later. A new ending starts at most 2 bytes before the new data. */
static int head_may_be_complete(const char *buf, size_t len, size_t last_len)
{
    const char *p = buf + (last_len > 3 ? last_len - 3 : 0), *end = buf + len;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (++p == end)
            return 0;
        if (*p == '\n' || (*p == '\r' && p + 1 != end && p[1] == '\n'))
            return 1;
    }
    return 0;
}

/* Whether an incomplete head has reached a limit: then the full parse must
 * run to answer 414 / 431 (or whatever error comes first). Costs at most one
 * bounded memchr, and nothing while the buffer is below both limits. */
static int limit_reached(const char *buf, size_t len, const struct oribi_limits *lim)
{
    const char *p = buf, *end = buf + len, *lf;
    size_t n;
    if (len < lim->max_request_line && len < lim->max_header_bytes)
        return 0;
    while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
        p += 2;
    n = (size_t)(end - p);
    lf = memchr(p, '\n', n < lim->max_request_line ? n : lim->max_request_line);
    if (lf == NULL)
        return n >= lim->max_request_line;
    return (size_t)(end - (lf + 1)) >= lim->max_header_bytes;
}

int oribi_parse_request(const char *buf, size_t len, size_t last_len, struct oribi_request *req,
                        const struct oribi_limits *limits)
{
    static const struct oribi_limits defaults = {
        ORIBI_DEFAULT_MAX_REQUEST_LINE,
        ORIBI_DEFAULT_MAX_HEADER_BYTES,
        ORIBI_DEFAULT_MAX_HEADERS,
    };
    struct oribi_limits lim = limits ? *limits : defaults;
    if (lim.max_request_line > MAX_LIMIT)
        lim.max_request_line = MAX_LIMIT;
    if (lim.max_header_bytes > MAX_LIMIT)
        lim.max_header_bytes = MAX_LIMIT;

    if (last_len != 0 && last_len < len && !head_may_be_complete(buf, len, last_len) && !limit_reached(buf, len, &lim))
        return ORIBI_PARSE_INCOMPLETE;
#ifdef HAVE_SSE42_PATH
    if (path == PATH_AVX2)
        return parse_avx2(buf, len, req, &lim);
    if (path == PATH_SSE42)
        return parse_sse42(buf, len, req, &lim);
#endif
#ifdef HAVE_NEON_PATH
    if (path == PATH_NEON)
        return parse_neon(buf, len, req, &lim);
#endif
    return parse_portable(buf, len, req, &lim);
}

#ifdef HAVE_SSE42_PATH
AVX2 static int parse_response_avx2(const char *buf, size_t len, int head_request, struct oribi_response_head *res)
{
    return parse_response_head(buf, len, head_request, res, PATH_AVX2);
}

SSE42 static int parse_response_sse42(const char *buf, size_t len, int head_request, struct oribi_response_head *res)
{
    return parse_response_head(buf, len, head_request, res, PATH_SSE42);
}
#endif

#ifdef HAVE_NEON_PATH
static int parse_response_neon(const char *buf, size_t len, int head_request, struct oribi_response_head *res)
{
    return parse_response_head(buf, len, head_request, res, PATH_NEON);
}
#endif

static int parse_response_portable(const char *buf, size_t len, int head_request, struct oribi_response_head *res)
{
    return parse_response_head(buf, len, head_request, res, PATH_PORTABLE);
}

int oribi_parse_response(const char *buf, size_t len, int head_request, struct oribi_response_head *res)
{
#ifdef HAVE_SSE42_PATH
    if (path == PATH_AVX2)
        return parse_response_avx2(buf, len, head_request, res);
    if (path == PATH_SSE42)
        return parse_response_sse42(buf, len, head_request, res);
#endif
#ifdef HAVE_NEON_PATH
    if (path == PATH_NEON)
        return parse_response_neon(buf, len, head_request, res);
#endif
    return parse_response_portable(buf, len, head_request, res);
}

int oribi_parser_simd(void)
{
    return path != PATH_PORTABLE;
}

const char *oribi_parser_path(void)
{
    static const char *const names[] = {"portable", "SSE4.2", "AVX2", "NEON"};
    return names[path];
}

#if defined(HAVE_SSE42_PATH) || defined(HAVE_NEON_PATH)
static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v && *v != '0';
}
#endif

/* ORIBI_NO_SSE42=1 in the environment forces the portable path, and
 * ORIBI_NO_AVX2=1 the SSE4.2 one; on aarch64, ORIBI_NO_NEON=1 the portable
 * one (tests and benchmarks compare them on one machine). NEON is in every
 * aarch64 CPU's baseline: nothing to ask the CPU. */
__attribute__((constructor)) static void choose_path(void)
{
#ifdef HAVE_SSE42_PATH
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.2") || env_set("ORIBI_NO_SSE42"))
        path = PATH_PORTABLE;
    else if (!__builtin_cpu_supports("avx2") || env_set("ORIBI_NO_AVX2"))
        path = PATH_SSE42;
    else
        path = PATH_AVX2;
#elif defined(HAVE_NEON_PATH)
    path = env_set("ORIBI_NO_NEON") ? PATH_PORTABLE : PATH_NEON;
#endif
}

static void rebase(const char **p, const char *from, size_t len, const char *to)
{
    /* compared as integers: a constant is not part of the buffer's object */
    uintptr_t at = (uintptr_t)*p, base = (uintptr_t)from;
    if (*p && at >= base && at - base <= len)
        *p = to + (at - base);
}

void oribi_request_rebase(struct oribi_request *req, const char *from, size_t len, const char *to)
{
    rebase(&req->method, from, len, to);
    rebase(&req->target, from, len, to);
    rebase(&req->path, from, len, to);
    rebase(&req->host, from, len, to);
    for (size_t i = 0; i < req->num_headers; i++) {
        rebase(&req->headers[i].name, from, len, to);
        rebase(&req->headers[i].value, from, len, to);
    }
}
