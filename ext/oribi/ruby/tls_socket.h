/* Oribi::TLSSocket (tls_socket.c): a hijacked TLS connection. */
#ifndef ORIBI_TLS_SOCKET_H
#define ORIBI_TLS_SOCKET_H
#include <ruby.h>

#include "loop/conn.h"

/* The app's object for c, which takes c's TLS (the loop then forgets c
 * without closing its socket); ahead: plaintext read past the request, or nil. */
VALUE oribi_tls_socket(struct oribi_conn *c, VALUE ahead);
void Init_oribi_tls_socket(VALUE mOribi);

#endif
