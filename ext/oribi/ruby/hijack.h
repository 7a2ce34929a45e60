/* Handing the socket to the app: full and partial hijack. */
#ifndef ORIBI_HIJACK_H
#define ORIBI_HIJACK_H

#include "ruby/exchange.h"

/* The connection as an IO (TCPSocket or UNIXSocket) that yields the bytes
 * the client sent past the request first; the loop forgets the conn. Raises
 * Oribi::ClientGone when kept output cannot be flushed first. */
VALUE oribi_hijack_io(struct oribi_exchange *x, struct oribi_conn *c);
VALUE oribi_full_hijack(VALUE ticket); /* env["rack.hijack"].call */
void Init_oribi_hijack(void);

#endif
