/*
 * libFuzzer target for ext/oribi/http/query.c, the byte half of
 * fast_query_parser. The object half (the params Rack builds) is checked
 * against Rack itself by fuzz/query_diff.rb; here each piece is checked
 * against a statement of Rack's rules written independently of query.c.
 *
 * Input layout: [sep][payload]; sep % 3 picks the separator set.
 *
 * Properties checked besides memory safety:
 *   - the pieces are what Rack's split gives: no piece holds a separator,
 *     each starts right after one separator and its run of spaces, they
 *     end at the next separator, and there is one more piece than
 *     oribi_query_count_seps counts;
 *   - decoding refuses exactly the pieces with a '%' not followed by two
 *     hex digits, never writes more bytes than it reads, and otherwise
 *     gives the bytes back with '+' as a space and %XX as that byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/query.h"

#include "check.h"

static int sep_byte(int sep, unsigned char c)
{
    if (sep == ORIBI_QUERY_SEP_AMP)
        return c == '&';
    return c == ';' || (sep == ORIBI_QUERY_SEP_SEMI_COMMA && c == ',');
}

static int hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

static int has_bad_escape(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '%' && !(i + 2 < len && hex((unsigned char)s[i + 1]) && hex((unsigned char)s[i + 2])))
            return 1;
    return 0;
}

/* Decoded bytes, read back against the input one token at a time. */
static void check_decoded(const char *s, size_t len, const char *out, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++, o++) {
        CHECK(o < n);
        if (s[i] == '+') {
            CHECK(out[o] == ' ');
        } else if (s[i] == '%') {
            char h[3] = {s[i + 1], s[i + 2], 0};
            CHECK((unsigned char)out[o] == strtoul(h, NULL, 16));
            i += 2;
        } else {
            CHECK(out[o] == s[i]);
        }
    }
    CHECK(o == n);
}

static void check_decode(const char *s, size_t len)
{
    char *out = malloc(len ? len : 1);
    size_t n = oribi_query_decode(s, len, out);
    if (has_bad_escape(s, len)) {
        CHECK(n == ORIBI_QUERY_BAD_ESCAPE);
    } else {
        CHECK(n <= len);
        check_decoded(s, len, out, n);
    }
    free(out);
}

static void check_pieces(const char *s, size_t len, int sep)
{
    size_t pos = 0, pieces = 0, expect_start = 0;
    int more = 1;
    while (more) {
        size_t start = pos;
        CHECK(start == expect_start);
        size_t n = oribi_query_next_piece(s, len, &pos, sep, &more);
        CHECK(start + n <= len);
        for (size_t i = start; i < start + n; i++)
            CHECK(!sep_byte(sep, (unsigned char)s[i]));
        CHECK(more ? sep_byte(sep, (unsigned char)s[start + n]) : start + n == len);
        expect_start = start + n + (more ? 1 : 0);
        while (more && expect_start < len && s[expect_start] == ' ')
            expect_start++;
        check_decode(s + start, n);
        pieces++;
    }
    CHECK(pos == len);
    CHECK(pieces == oribi_query_count_seps(s, len, sep) + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int sep = data[0] % 3;
    /* A heap block of exactly the payload: ASan sees any read past it. */
    size_t len = size - 1;
    char *s = malloc(len ? len : 1);
    memcpy(s, data + 1, len);
    check_pieces(s, len, sep);
    free(s);
    return 0;
}
