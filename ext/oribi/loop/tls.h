/*
 * TLS over a connection's socket, with OpenSSL: the transport behind
 * loop/transport.h for a connection taken from a TLS listener. The
 * handshake runs in the loop's reads (the first bytes a connection sends
 * are its ClientHello), never blocking: a read that needs the socket to
 * become readable or writable first is EAGAIN, as on a plain socket. One
 * thread at a time uses a connection's TLS, as its plain socket: the loop,
 * or the app thread its request is with.
 *
 * Without OpenSSL at build time (ORIBI_HAVE_OPENSSL undefined) there are no
 * TLS listeners; these are never called.
 */
#ifndef ORIBI_TLS_H
#define ORIBI_TLS_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct oribi_conn;
struct ssl_ctx_st;
struct ssl_st;

/* The socket under a connection's TLS, as TLS reads and writes it. */
struct oribi_tls_io {
    int fd;
    unsigned char drained; /* the last read found the socket drained */
    char *pre;             /* TLS bytes read before TLS began (behind a PROXY header), else NULL */
    size_t pre_len, pre_off;
};

/* Begins TLS on c as the server, with ctx's certificates and settings.
 * 0, or -1 (out of memory: the conn is closed). */
int oribi_tls_start(struct oribi_conn *c, struct ssl_ctx_st *ctx);
/* Bytes of the TLS stream already read from the socket (behind a PROXY
 * header): TLS reads them before the socket's. 0, or -1 out of memory. */
int oribi_tls_preread(struct oribi_conn *c, const char *p, size_t n);
/* The app takes the connection (a hijack): c's TLS, moved to *io, which
 * must stay where it is for the TLS's life; c has none after. */
struct ssl_st *oribi_tls_take(struct oribi_conn *c, struct oribi_tls_io *io);
/* Frees c's TLS, without a word to the peer (the socket is being closed). */
void oribi_tls_free(struct oribi_conn *c);

ssize_t oribi_tls_read(struct oribi_conn *c, void *buf, size_t n);
ssize_t oribi_tls_writev(struct oribi_conn *c, const struct iovec *iov, int iovcnt);
ssize_t oribi_tls_sendfile(struct oribi_conn *c, int fd, int64_t *off, size_t n);
/* close_notify, then the socket's write side. */
int oribi_tls_shutdown(struct oribi_conn *c);
/* 1 when the last read found the socket drained and TLS holds no bytes
 * read but not yet given: nothing to read until the poller says so. */
int oribi_tls_drained(const struct oribi_conn *c);
/* The client's certificate (asked for under verify_mode peer or
 * force_peer, and checked) as PEM text in a malloc'd buffer the caller
 * frees, its length in *len; NULL when it gave none. */
char *oribi_tls_peer_pem(const struct oribi_conn *c, size_t *len);
/* 1 while the handshake is not done. */
int oribi_tls_handshaking(const struct oribi_conn *c);

#endif
