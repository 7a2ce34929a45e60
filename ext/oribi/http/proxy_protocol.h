/*
 * The PROXY protocol header (haproxy's spec, versions 1 and 2): what a
 * proxy in TCP mode (haproxy's send-proxy, an AWS NLB) writes before the
 * first byte of its client's, to say who the client is. Stateless over a
 * caller's buffer, as the request parser: call again with more bytes.
 */
#ifndef ORIBI_PROXY_PROTOCOL_H
#define ORIBI_PROXY_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h" /* ORIBI_PARSE_ERROR, ORIBI_PARSE_INCOMPLETE */

/* Which versions a listener takes (a mask; 0: none, a PROXY line is then
 * the request line of a bad request). */
#define ORIBI_PROXY_V1 1
#define ORIBI_PROXY_V2 2

/* v1: "PROXY TCP6 " + two addresses of 39 + ports + spaces + CRLF. */
#define ORIBI_PROXY_V1_MAX 107
/* v2: the 16 bytes before the addresses, then addresses and TLVs. Its
 * length field allows 64 KiB; what the proxies send (addresses, an AWS
 * endpoint id, a unique id) is well under this, and a connection holds
 * no more of it than this before it is refused. */
#define ORIBI_PROXY_V2_MAX 4096

enum oribi_proxy_family {
    ORIBI_PROXY_LOCAL = 0, /* UNKNOWN, LOCAL, UNSPEC or unix: the socket's own peer stands */
    ORIBI_PROXY_INET = 4,
    ORIBI_PROXY_INET6 = 6,
};

struct oribi_proxy_header {
    int version; /* 1 or 2 */
    int family;  /* enum oribi_proxy_family */
    /* network order; 4 bytes of each for INET */
    unsigned char src[16], dst[16];
    uint16_t src_port, dst_port; /* host order */
};

/* An address as text, n bytes at s (no NUL needed), of family
 * (ORIBI_PROXY_INET or INET6), into out (4 or 16 bytes, network order): 0,
 * or -1 when it is not one. inet_pton's forms (a dotted quad without
 * leading zeros; RFC 4291 text) and only their bytes: inet_pton would stop
 * at a NUL in the middle and take the address before it (the fuzzer's
 * first find). A v1 header's addresses, and the one a trusted proxy's
 * field gives (remote_addr_header). */
int oribi_address_parse(const char *s, size_t n, int family, unsigned char *out);

/* Parses a header at the start of buf, of the versions in accept (a mask
 * of ORIBI_PROXY_V*). Returns its length (the request starts right after
 * it) with *out filled, ORIBI_PARSE_INCOMPLETE while what is there could
 * still become one, or ORIBI_PARSE_ERROR (not a header, a version not
 * accepted, a malformed or oversized one). Reads at most
 * ORIBI_PROXY_V2_MAX bytes of buf, whatever len is. */
int oribi_proxy_parse(const char *buf, size_t len, int accept, struct oribi_proxy_header *out);

#endif
