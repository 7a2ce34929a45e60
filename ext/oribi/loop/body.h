/*
 * Request bodies, read by the loop before the app is called: Content-Length
 * or chunked (decoded here), held in the connection's buffer up to
 * body_buffer bytes and spilled to an unlinked tmpfile beyond.
 */
#ifndef ORIBI_BODY_H
#define ORIBI_BODY_H

#include "loop/loop.h"

enum { REQ_BODY_MORE = 0, REQ_BODY_DONE = 1 };

/* Sets up body reading for the head just parsed. Returns REQ_BODY_MORE,
 * REQ_BODY_DONE or an HTTP status (413, 500) to answer with. */
int oribi_body_begin(struct oribi_loop *loop, struct oribi_conn *c);

/* Consumes the input bytes after what was already taken. Returns REQ_BODY_MORE,
 * REQ_BODY_DONE (c->rest_off set) or a status (400, 413, 500). */
int oribi_body_feed(struct oribi_loop *loop, struct oribi_conn *c);

/* Makes room for n more bytes in c->buf; 0 or -1 (out of memory). */
int oribi_conn_reserve(struct oribi_conn *c, size_t n);
/* Shrinks c->buf to its bytes, for a request that may wait long in the app
 * (fibers): its head, and any pipelined bytes after it, stay. */
void oribi_conn_fit(struct oribi_conn *c);

#endif
