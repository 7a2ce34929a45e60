/*
 * The PROXY protocol parser (ext/oribi/http/proxy_protocol.c) on the
 * headers haproxy and an AWS NLB send, split at every byte, followed by a
 * request, and on the broken ones it must refuse. Run by rake test:unit;
 * exits non-zero after the first case that differs, naming each.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/proxy_protocol.h"

#define ANY (ORIBI_PROXY_V1 | ORIBI_PROXY_V2)

static int failures;

#define EXPECT(cond, what)                                                       \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, what, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

/* In a heap block of exactly len bytes, so that ASan sees a read past it. */
static int parse(const void *bytes, size_t len, int accept, struct oribi_proxy_header *h)
{
    char *buf = malloc(len ? len : 1);
    memcpy(buf, bytes, len);
    int r = oribi_proxy_parse(buf, len, accept, h);
    free(buf);
    return r;
}

/* A header that parses to want bytes: every prefix is incomplete, and
 * with a request after it the same length comes back. */
static void whole(const char *what, const void *bytes, size_t len, int accept, struct oribi_proxy_header *h)
{
    for (size_t i = 0; i < len; i++) {
        struct oribi_proxy_header t;
        if (parse(bytes, i, accept, &t) != ORIBI_PARSE_INCOMPLETE) {
            fprintf(stderr, "%s: the first %zu of %zu bytes are not incomplete\n", what, i, len);
            failures++;
            break;
        }
    }
    EXPECT(parse(bytes, len, accept, h) == (int)len, what);
    char *more = malloc(len + 18);
    memcpy(more, bytes, len);
    memcpy(more + len, "GET / HTTP/1.1\r\n\r\n", 18);
    struct oribi_proxy_header t;
    EXPECT(parse(more, len + 18, accept, &t) == (int)len && memcmp(&t, h, sizeof(t)) == 0, what);
    free(more);
}

static void refused(const char *what, const void *bytes, size_t len, int accept)
{
    struct oribi_proxy_header h;
    int r = parse(bytes, len, accept, &h);
    if (r != ORIBI_PARSE_ERROR) {
        fprintf(stderr, "%s: %d, want an error\n", what, r);
        failures++;
    }
}

static void v1_refused(const char *line)
{
    refused(line, line, strlen(line), ANY);
}

static size_t v2(unsigned char *out, int cmd, int fam, const unsigned char *addr, size_t alen, size_t tlvs)
{
    static const unsigned char sig[12] = {'\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};
    memcpy(out, sig, 12);
    out[12] = (unsigned char)(0x20 | cmd);
    out[13] = (unsigned char)fam;
    size_t rest = alen + tlvs;
    out[14] = (unsigned char)(rest >> 8);
    out[15] = (unsigned char)rest;
    memcpy(out + 16, addr, alen);
    memset(out + 16 + alen, 0xee, tlvs);
    return 16 + rest;
}

static void test_v1(void)
{
    struct oribi_proxy_header h;
    const char *tcp4 = "PROXY TCP4 192.0.2.7 127.0.0.1 56324 9292\r\n";
    whole("TCP4", tcp4, strlen(tcp4), ORIBI_PROXY_V1, &h);
    EXPECT(h.version == 1 && h.family == ORIBI_PROXY_INET, "TCP4");
    EXPECT(memcmp(h.src, "\xc0\x00\x02\x07", 4) == 0 && memcmp(h.dst, "\x7f\x00\x00\x01", 4) == 0, "TCP4 addresses");
    EXPECT(h.src_port == 56324 && h.dst_port == 9292, "TCP4 ports");

    const char *tcp6 = "PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
    whole("TCP6", tcp6, strlen(tcp6), ORIBI_PROXY_V1, &h);
    unsigned char a[16];
    inet_pton(AF_INET6, "2001:db8::1", a);
    EXPECT(h.family == ORIBI_PROXY_INET6 && memcmp(h.src, a, 16) == 0, "TCP6");
    EXPECT(h.src_port == 65535 && h.dst_port == 0, "TCP6 ports");

    /* The longest lines: TCP6 with the longest addresses, 104 bytes;
     * UNKNOWN with anything, 107, the spec's bound. */
    const char *tcp6_longest =
        "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
        "65535 65535\r\n";
    EXPECT(strlen(tcp6_longest) == 104, "the longest TCP6 line's length");
    whole("the longest TCP6 line", tcp6_longest, strlen(tcp6_longest), ANY, &h);
    char unknown_longest[ORIBI_PROXY_V1_MAX];
    memset(unknown_longest, 'x', sizeof(unknown_longest));
    memcpy(unknown_longest, "PROXY UNKNOWN ", 14);
    memcpy(unknown_longest + sizeof(unknown_longest) - 2, "\r\n", 2);
    whole("the longest UNKNOWN line", unknown_longest, sizeof(unknown_longest), ANY, &h);

    whole("UNKNOWN", "PROXY UNKNOWN\r\n", 15, ORIBI_PROXY_V1, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "UNKNOWN");
    const char *unknown = "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n";
    whole("UNKNOWN with addresses", unknown, strlen(unknown), ORIBI_PROXY_V1, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "UNKNOWN with addresses");

    v1_refused("PROXY TCP4 192.0.2.7  127.0.0.1 1 2\r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 1 2 \r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 1\r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 1 2 3\r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 1 2\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 01 2\r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 65536 2\r\n");
    v1_refused("PROXY TCP4 192.0.2.7 127.0.0.1 -1 2\r\n");
    v1_refused("PROXY TCP4 192.0.2.07 127.0.0.1 1 2\r\n");
    v1_refused("PROXY TCP4 192.0.2.256 127.0.0.1 1 2\r\n");
    refused("a NUL inside an address", "PROXY TCP4 192.0.2.8\0007 127.0.0.1 1 2\r\n", 38, ANY);
    refused("a NUL inside an IPv6 address", "PROXY TCP6 ::1\0:7 ::1 1 2\r\n", 27, ANY);
    v1_refused("PROXY TCP4 ::1 127.0.0.1 1 2\r\n");
    v1_refused("PROXY TCP6 192.0.2.7 ::1 1 2\r\n");
    v1_refused("PROXY TCP5 192.0.2.7 127.0.0.1 1 2\r\n");
    v1_refused("PROXY tcp4 192.0.2.7 127.0.0.1 1 2\r\n");
    v1_refused("PROXY UNKNOWNX\r\n");
    v1_refused("PROXY \r\n");
    v1_refused("PROXYTCP4 192.0.2.7 127.0.0.1 1 2\r\n");
    v1_refused("GET / HTTP/1.1\r\n\r\n");
    v1_refused("PRIX");

    /* No LF within 107 bytes: refused at the 107th, not waited for. */
    char line[300];
    memset(line, '1', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    struct oribi_proxy_header t;
    EXPECT(parse(line, ORIBI_PROXY_V1_MAX - 1, ANY, &t) == ORIBI_PARSE_INCOMPLETE, "106 bytes, no LF");
    refused("107 bytes, no LF", line, ORIBI_PROXY_V1_MAX, ANY);
    refused("300 bytes, no LF", line, sizeof(line), ANY);
    memcpy(line + ORIBI_PROXY_V1_MAX - 1, "\r\n", 2);
    refused("an LF as the 108th byte", line, ORIBI_PROXY_V1_MAX + 1, ANY);

    refused("v1 on a v2 listener", tcp4, strlen(tcp4), ORIBI_PROXY_V2);
}

static void test_v2(void)
{
    unsigned char buf[5000], addr[216];
    struct oribi_proxy_header h;
    memcpy(addr, "\xc0\x00\x02\x07\x7f\x00\x00\x01\xdc\x04\x24\x4c", 12);
    size_t n = v2(buf, 1, 0x11, addr, 12, 0);
    whole("v2 TCP4", buf, n, ORIBI_PROXY_V2, &h);
    EXPECT(h.version == 2 && h.family == ORIBI_PROXY_INET && memcmp(h.src, addr, 4) == 0, "v2 TCP4");
    EXPECT(h.src_port == 56324 && h.dst_port == 9292, "v2 TCP4 ports");

    /* An NLB's: TLVs after the addresses (its endpoint id), skipped. */
    n = v2(buf, 1, 0x11, addr, 12, 40);
    whole("v2 TCP4 with TLVs", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_INET && n == 16 + 12 + 40, "v2 TCP4 with TLVs");

    for (int i = 0; i < 36; i++)
        addr[i] = (unsigned char)i;
    n = v2(buf, 1, 0x21, addr, 36, 0);
    whole("v2 TCP6", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_INET6 && memcmp(h.src, addr, 16) == 0 && memcmp(h.dst, addr + 16, 16) == 0,
           "v2 TCP6");
    EXPECT(h.src_port == (32 << 8 | 33) && h.dst_port == (34 << 8 | 35), "v2 TCP6 ports");

    /* LOCAL (the proxy's own health check): the family and addresses are
     * ignored; UNSPEC and unix: the socket's own peer. */
    n = v2(buf, 0, 0x00, addr, 0, 0);
    whole("v2 LOCAL", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "v2 LOCAL");
    n = v2(buf, 0, 0x11, addr, 12, 0);
    whole("v2 LOCAL with addresses", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "v2 LOCAL with addresses");
    n = v2(buf, 1, 0x00, addr, 0, 0);
    whole("v2 UNSPEC", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "v2 UNSPEC");
    memset(addr, 'a', sizeof(addr));
    n = v2(buf, 1, 0x31, addr, 216, 0);
    whole("v2 unix", buf, n, ANY, &h);
    EXPECT(h.family == ORIBI_PROXY_LOCAL, "v2 unix");

    /* The largest header taken, and one byte more. */
    n = v2(buf, 1, 0x11, addr, 12, ORIBI_PROXY_V2_MAX - 16 - 12);
    whole("v2 at ORIBI_PROXY_V2_MAX", buf, n, ANY, &h);
    n = v2(buf, 1, 0x11, addr, 12, ORIBI_PROXY_V2_MAX - 16 - 12 + 1);
    refused("v2 over ORIBI_PROXY_V2_MAX, all there", buf, n, ANY);
    refused("v2 over ORIBI_PROXY_V2_MAX, its first 16 bytes", buf, 16, ANY);
    buf[14] = buf[15] = 0xff;
    refused("v2 saying 65535 bytes follow", buf, 16, ANY);

    n = v2(buf, 1, 0x11, addr, 11, 0);
    refused("v2 TCP4 with 11 address bytes", buf, n, ANY);
    n = v2(buf, 1, 0x21, addr, 35, 0);
    refused("v2 TCP6 with 35 address bytes", buf, n, ANY);
    n = v2(buf, 1, 0x31, addr, 215, 0);
    refused("v2 unix with 215 address bytes", buf, n, ANY);
    n = v2(buf, 2, 0x11, addr, 12, 0);
    refused("v2 command 2", buf, n, ANY);
    n = v2(buf, 1, 0x13, addr, 12, 0);
    refused("v2 family 0x13", buf, n, ANY);
    n = v2(buf, 1, 0x41, addr, 12, 0);
    refused("v2 family 0x41", buf, n, ANY);
    n = v2(buf, 1, 0x11, addr, 12, 0);
    buf[12] = 0x11;
    refused("v2 version 1", buf, n, ANY);
    n = v2(buf, 1, 0x11, addr, 12, 0);
    buf[7] = 'q';
    refused("v2 signature", buf, n, ANY);
    refused("v2 signature, its first 8 bytes", buf, 8, ANY);
    n = v2(buf, 1, 0x11, addr, 12, 0);
    refused("v2 on a v1 listener", buf, n, ORIBI_PROXY_V1);
    refused("no version accepted", buf, n, 0);
}

int main(void)
{
    test_v1();
    test_v2();
    if (failures) {
        fprintf(stderr, "proxy_protocol: %d failure(s)\n", failures);
        return 1;
    }
    puts("proxy_protocol: ok");
    return 0;
}
