/*
 * Connections the app is done with, back to the loop. With one thread the
 * loop is not running while a response is written, so a conn goes straight
 * back. With several, only the dispatcher touches the loop: app threads add
 * to a list (under the GVL) that the dispatcher drains before each run of
 * the loop, and wake it if it sleeps there, so none is missed.
 */
#ifndef ORIBI_HANDBACK_H
#define ORIBI_HANDBACK_H

#include <ruby.h>

#include "loop/loop.h"

struct oribi_handback {
    struct oribi_conn *c;
    int detach; /* hijacked: the loop forgets the conn */
};

struct oribi_handbacks {
    struct oribi_loop *loop;
    int direct;              /* one app thread: straight back to the loop, from that thread */
    const VALUE *dispatcher; /* the thread that runs the loop (others use the list) */
    const int *in_loop;      /* the dispatcher sleeps in the loop (wake it) */
    struct oribi_handback *list;
    int n, cap;
};

/* The response on c is over (c->keepalive: the conn may serve another).
 * Raises NoMemError when the list cannot grow. */
void oribi_handback(struct oribi_handbacks *h, struct oribi_conn *c);

/* The app took c (hijack): its events stop at once (the app may close the
 * fd and a new connection get its number before the dispatcher looks), and
 * the loop forgets it. */
void oribi_handback_detach(struct oribi_handbacks *h, struct oribi_conn *c);

/* The dispatcher, with the GVL, the loop not running: into the loop. */
void oribi_handbacks_drain(struct oribi_handbacks *h);

void oribi_handbacks_free(struct oribi_handbacks *h);

#endif
