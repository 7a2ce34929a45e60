/*
 * TLS for the load generator (https:// URLs), over OpenSSL when the
 * extension was built with it (ORIBI_TLS, from extconf.rb finding
 * libssl-dev); without it every function here fails and lg_tls_available()
 * says so. Sockets stay non-blocking: a step that must wait says which
 * readiness it waits for.
 */
#ifndef ORIBI_LOADGEN_TLS_H
#define ORIBI_LOADGEN_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct lg_tls;      /* a run's client context: verification, server name */
struct lg_tls_conn; /* one connection's TLS state */

/* Whether this build has TLS. */
int lg_tls_available(void);

/* A context sending server_name as SNI (none when NULL or an IP literal)
 * and, unless insecure, checking the server's certificate against the
 * system's CAs (or $SSL_CERT_FILE) and server_name; resume: each new
 * connection offers the last session (ticket) the server gave, on any
 * thread. NULL with a message in err when TLS is unavailable or OpenSSL
 * fails. */
struct lg_tls *lg_tls_new(const char *server_name, int insecure, int resume, char *err, size_t errlen);
/* Handshakes that resumed a session, of all done (resume only). */
void lg_tls_resumed(struct lg_tls *t, uint64_t *resumed, uint64_t *done);
void lg_tls_free(struct lg_tls *t);

/* A client connection on the connected socket fd; NULL when out of memory. */
struct lg_tls_conn *lg_tls_start(struct lg_tls *t, int fd);
void lg_tls_end(struct lg_tls_conn *c);

/* One handshake step: 1 done, 0 waiting (*want_write: for the socket to
 * take bytes, else to bring some), -1 failed (lg_tls_error tells why). */
int lg_tls_handshake(struct lg_tls_conn *c, int *want_write);

/* As send() and recv() on a non-blocking socket: bytes moved; -1 with errno
 * (EAGAIN: wait for readiness and call again with the same bytes); recv 0
 * at the end of the stream (close_notify, or a close without one). */
ssize_t lg_tls_send(struct lg_tls_conn *c, const void *p, size_t n);
ssize_t lg_tls_recv(struct lg_tls_conn *c, void *p, size_t n);

/* Whether decrypted bytes wait inside the TLS layer, where the poller cannot
 * see them. */
int lg_tls_pending(const struct lg_tls_conn *c);

/* Why the last failure on this thread happened, as OpenSSL words it
 * ("certificate verify failed: self-signed certificate"). */
void lg_tls_error(const struct lg_tls_conn *c, char *buf, size_t n);

#endif
