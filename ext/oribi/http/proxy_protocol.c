/*
 * The PROXY protocol header, versions 1 and 2 (proxy_protocol.h). Strict:
 * a v1 line is the one form the spec gives, single spaces, canonical
 * addresses and ports, CRLF within 107 bytes; a v2 header has a known
 * version, command and family, and a length that holds its addresses and
 * stays under ORIBI_PROXY_V2_MAX. Every length read from the network is
 * checked against what is in the buffer before a byte past it is looked at.
 */
#include "http/proxy_protocol.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

static const unsigned char v2_sig[12] = {'\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};

/* A v1 port: decimal, 0..65535, no sign and no leading zero (the spec's
 * form, which is what every proxy writes). */
static int v1_port(const char *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

int oribi_address_parse(const char *s, size_t n, int family, unsigned char *out)
{
    char tmp[46]; /* INET6_ADDRSTRLEN */
    if (n == 0 || n >= sizeof(tmp))
        return -1;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
        if (!(ch == '.' || (ch >= '0' && ch <= '9') || (family == ORIBI_PROXY_INET6 && (hex || ch == ':'))))
            return -1;
    }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    return inet_pton(family == ORIBI_PROXY_INET ? AF_INET : AF_INET6, tmp, out) == 1 ? 0 : -1;
}

/* "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n" or "PROXY UNKNOWN[ anything]\r\n". */
static int parse_v1(const char *buf, size_t len, struct oribi_proxy_header *out)
{
    static const char sig[] = "PROXY ";
    size_t n = len < sizeof(sig) - 1 ? len : sizeof(sig) - 1;
    if (memcmp(buf, sig, n) != 0)
        return ORIBI_PARSE_ERROR;
    const char *lf = memchr(buf, '\n', len < ORIBI_PROXY_V1_MAX ? len : ORIBI_PROXY_V1_MAX);
    if (!lf)
        return len >= ORIBI_PROXY_V1_MAX ? ORIBI_PARSE_ERROR : ORIBI_PARSE_INCOMPLETE;
    size_t line = (size_t)(lf - buf) + 1; /* past the signature: it holds no LF */
    if (lf[-1] != '\r')
        return ORIBI_PARSE_ERROR;
    const char *p = buf + sizeof(sig) - 1, *end = lf - 1; /* the fields, CRLF excluded */
    memset(out, 0, sizeof(*out));
    out->version = 1;
    if ((size_t)(end - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 && (end - p == 7 || p[7] == ' ')) {
        out->family = ORIBI_PROXY_LOCAL;
        return (int)line;
    }
    if (end - p < 5 || memcmp(p, "TCP", 3) != 0 || (p[3] != '4' && p[3] != '6') || p[4] != ' ')
        return ORIBI_PARSE_ERROR;
    out->family = p[3] == '4' ? ORIBI_PROXY_INET : ORIBI_PROXY_INET6;
    p += 5;
    /* Four fields, one space between each: an empty one (two spaces, a
     * trailing space) is refused by its own check. */
    const char *f[4];
    size_t fl[4];
    for (int i = 0; i < 4; i++) {
        const char *sp = i < 3 ? memchr(p, ' ', (size_t)(end - p)) : end;
        if (!sp)
            return ORIBI_PARSE_ERROR;
        f[i] = p;
        fl[i] = (size_t)(sp - p);
        p = sp + 1;
    }
    if (memchr(f[3], ' ', fl[3]) || oribi_address_parse(f[0], fl[0], out->family, out->src) < 0 ||
        oribi_address_parse(f[1], fl[1], out->family, out->dst) < 0 || v1_port(f[2], fl[2], &out->src_port) < 0 ||
        v1_port(f[3], fl[3], &out->dst_port) < 0)
        return ORIBI_PARSE_ERROR;
    return (int)line;
}

/* The signature, version 2 and a command (LOCAL, PROXY), a family and
 * transport, the length of the rest, addresses, TLVs (skipped). */
static int parse_v2(const unsigned char *buf, size_t len, struct oribi_proxy_header *out)
{
    size_t n = len < sizeof(v2_sig) ? len : sizeof(v2_sig);
    if (memcmp(buf, v2_sig, n) != 0)
        return ORIBI_PARSE_ERROR;
    if (len > 12 && ((buf[12] >> 4) != 2 || (buf[12] & 0xf) > 1))
        return ORIBI_PARSE_ERROR;
    int local = len > 12 && (buf[12] & 0xf) == 0;
    size_t need = 0; /* address bytes the family takes */
    if (len > 13 && !local) {
        switch (buf[13]) {
        case 0x00: /* UNSPEC */
            break;
        case 0x11: /* TCP, UDP over IPv4 */
        case 0x12:
            need = 12;
            break;
        case 0x21: /* ... over IPv6 */
        case 0x22:
            need = 36;
            break;
        case 0x31: /* unix stream, datagram: two 108-byte paths */
        case 0x32:
            need = 216;
            break;
        default:
            return ORIBI_PARSE_ERROR;
        }
    }
    if (len < 16)
        return ORIBI_PARSE_INCOMPLETE;
    size_t rest = (size_t)buf[14] << 8 | buf[15];
    if (rest < need || 16 + rest > ORIBI_PROXY_V2_MAX)
        return ORIBI_PARSE_ERROR;
    if (len < 16 + rest)
        return ORIBI_PARSE_INCOMPLETE;
    memset(out, 0, sizeof(*out));
    out->version = 2;
    out->family = ORIBI_PROXY_LOCAL; /* LOCAL (a proxy's own health check), UNSPEC, unix */
    const unsigned char *a = buf + 16;
    if (need == 12) {
        out->family = ORIBI_PROXY_INET;
        memcpy(out->src, a, 4);
        memcpy(out->dst, a + 4, 4);
        a += 8;
    } else if (need == 36) {
        out->family = ORIBI_PROXY_INET6;
        memcpy(out->src, a, 16);
        memcpy(out->dst, a + 16, 16);
        a += 32;
    }
    if (out->family != ORIBI_PROXY_LOCAL) {
        out->src_port = (uint16_t)(a[0] << 8 | a[1]);
        out->dst_port = (uint16_t)(a[2] << 8 | a[3]);
    }
    return (int)(16 + rest);
}

int oribi_proxy_parse(const char *buf, size_t len, int accept, struct oribi_proxy_header *out)
{
    if (len == 0)
        return ORIBI_PARSE_INCOMPLETE;
    if (buf[0] == 'P' && (accept & ORIBI_PROXY_V1))
        return parse_v1(buf, len, out);
    if (buf[0] == '\r' && (accept & ORIBI_PROXY_V2))
        return parse_v2((const unsigned char *)buf, len, out);
    return ORIBI_PARSE_ERROR;
}
