/*
 * The cork: answers to pipelined requests held back, so that several leave
 * in one sendmsg. Decided when a request is handed out (cork_take: its
 * next request is there already, and the app answers such requests within
 * ORIBI_CORK_APP_US on average), kept when the response is done
 * (cork_finish: the conn goes on with its next request there), and sent
 * when the pipeline runs out (cork_release), before the loop waits and
 * when the scheduler looks at the other conns (flush_corked). The bytes
 * are output.c's: oribi_conn_write_last keeps them while c->cork.
 */
#ifndef ORIBI_CORK_H
#define ORIBI_CORK_H

#include <stdint.h>

#include "loop/pending.h"

struct oribi_loop;
struct oribi_conn;

struct oribi_cork {
    struct oribi_pending *held; /* conns holding responses back */
    int n, cap;
    int64_t app_us; /* the app's time for pipelined requests (µs, moving average) */
};

/* A request goes to the app: whether its response may wait for the next. */
void cork_take(struct oribi_loop *loop, struct oribi_conn *c);

/* The app is done with it: the app's time counted, and a response held
 * back kept so (the conn goes on) or sent. 0, or -1 the peer is gone. */
int cork_finish(struct oribi_loop *loop, struct oribi_conn *c);

/* What the conn holds back goes now: 0, or -1 the peer is gone. */
int cork_release(struct oribi_conn *c);

/* Every conn's held-back responses go now. */
void flush_corked(struct oribi_loop *loop);

void cork_free(struct oribi_cork *k);

#endif
