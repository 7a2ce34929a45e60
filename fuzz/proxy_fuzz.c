/*
 * libFuzzer target for ext/oribi/http/proxy_protocol.c, the PROXY protocol
 * header a proxy_protocol listener reads before the first request.
 *
 * Input layout: [accept][payload]; accept & 3 is the versions taken.
 *
 * Properties checked besides memory safety (each call on a heap block of
 * exactly the bytes given, so that ASan sees a read past them):
 *   - the answer is an error, incomplete, or a length within the input and
 *     the version's bound, of a version accepted;
 *   - the answer on any prefix is incomplete or the answer on the whole
 *     (the parse decides on bytes already seen), and a prefix holding the
 *     whole header gives the same header;
 *   - bytes past ORIBI_PROXY_V2_MAX change nothing;
 *   - what it returns is what the bytes say, checked apart from the
 *     parser: a v1 line is written again from the result (an IPv4 one
 *     byte for byte, an IPv6 one parsed again to the same addresses), a v2
 *     header's length, family and addresses are read at their offsets.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/proxy_protocol.h"

#include "check.h"

static int parse(const uint8_t *data, size_t len, int accept, struct oribi_proxy_header *h)
{
    char *buf = malloc(len ? len : 1);
    memcpy(buf, data, len);
    memset(h, 0xa5, sizeof(*h));
    int r = oribi_proxy_parse(buf, len, accept, h);
    free(buf);
    return r;
}

static void check_v1(const uint8_t *line, int r, const struct oribi_proxy_header *h)
{
    CHECK(r <= ORIBI_PROXY_V1_MAX && memcmp(line, "PROXY ", 6) == 0);
    CHECK(line[r - 2] == '\r' && line[r - 1] == '\n' && !memchr(line, '\n', (size_t)r - 1));
    if (h->family == ORIBI_PROXY_LOCAL) {
        CHECK(memcmp(line + 6, "UNKNOWN", 7) == 0 && (r == 15 || line[13] == ' '));
        return;
    }
    int af = h->family == ORIBI_PROXY_INET ? AF_INET : AF_INET6;
    char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], again[ORIBI_PROXY_V1_MAX + 1];
    CHECK(inet_ntop(af, h->src, src, sizeof(src)) && inet_ntop(af, h->dst, dst, sizeof(dst)));
    int n = snprintf(again, sizeof(again), "PROXY TCP%c %s %s %u %u\r\n", af == AF_INET ? '4' : '6', src, dst,
                     h->src_port, h->dst_port);
    CHECK(n > 0 && n <= ORIBI_PROXY_V1_MAX);
    if (af == AF_INET) {
        CHECK(n == r && memcmp(again, line, (size_t)r) == 0);
    } else {
        struct oribi_proxy_header h2;
        CHECK(parse((const uint8_t *)again, (size_t)n, ORIBI_PROXY_V1, &h2) == n);
        CHECK(memcmp(&h2, h, sizeof(h2)) == 0);
    }
}

static void check_v2(const uint8_t *b, int r, const struct oribi_proxy_header *h)
{
    CHECK(r >= 16 && r <= ORIBI_PROXY_V2_MAX && r == 16 + (b[14] << 8 | b[15]));
    CHECK(memcmp(b, "\r\n\r\n\0\r\nQUIT\n", 12) == 0 && (b[12] == 0x20 || b[12] == 0x21));
    int fam = b[12] == 0x20 ? 0 : b[13] >> 4;
    if (fam == 1) {
        CHECK(h->family == ORIBI_PROXY_INET && r >= 28);
        CHECK(memcmp(h->src, b + 16, 4) == 0 && memcmp(h->dst, b + 20, 4) == 0);
        CHECK(h->src_port == (b[24] << 8 | b[25]) && h->dst_port == (b[26] << 8 | b[27]));
    } else if (fam == 2) {
        CHECK(h->family == ORIBI_PROXY_INET6 && r >= 52);
        CHECK(memcmp(h->src, b + 16, 16) == 0 && memcmp(h->dst, b + 32, 16) == 0);
        CHECK(h->src_port == (b[48] << 8 | b[49]) && h->dst_port == (b[50] << 8 | b[51]));
    } else {
        CHECK(h->family == ORIBI_PROXY_LOCAL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int accept = data[0] & 3;
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    struct oribi_proxy_header h, t;
    int r = parse(p, len, accept, &h);
    CHECK(r == ORIBI_PARSE_ERROR || r == ORIBI_PARSE_INCOMPLETE || (r > 0 && (size_t)r <= len));
    if (r > 0) {
        CHECK(h.version == 1 || h.version == 2);
        CHECK(accept & (h.version == 1 ? ORIBI_PROXY_V1 : ORIBI_PROXY_V2));
        if (h.version == 1)
            check_v1(p, r, &h);
        else
            check_v2(p, r, &h);
    }
    if (len > ORIBI_PROXY_V2_MAX) {
        CHECK(parse(p, ORIBI_PROXY_V2_MAX, accept, &t) == r);
        CHECK(r <= 0 || memcmp(&t, &h, sizeof(t)) == 0);
    }
    /* Prefixes: every one for short inputs, a few cuts for long ones. */
    size_t step = len <= 256 ? 1 : len / 61 + 1;
    for (size_t i = 0; i < len; i += step) {
        int q = parse(p, i, accept, &t);
        if (r > 0 && i >= (size_t)r)
            CHECK(q == r && memcmp(&t, &h, sizeof(t)) == 0);
        else if (r > 0)
            CHECK(q == ORIBI_PARSE_INCOMPLETE);
        else
            CHECK(q == ORIBI_PARSE_INCOMPLETE || q == r);
    }
    return 0;
}
