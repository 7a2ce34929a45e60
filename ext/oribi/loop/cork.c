/*
 * The cork (cork.h): when a pipelined request's answer waits for the
 * next ones', and when what is held back goes.
 */
#include "loop/internal.h"

#include <stdlib.h>

void cork_take(struct oribi_loop *loop, struct oribi_conn *c)
{
    /* The next request is here already (pipelining): this response may
     * wait for the next ones' (oribi_conn_write_last), and what the conn
     * holds back goes with it, while the app answers such requests in
     * microseconds: a response never waits long for the next one's app. */
    c->piped_us = 0;
    c->cork = 0;
    if (keepalive_decide(loop, c) && c->len > c->rest_off) {
        c->piped_us = oribi_mono_us();
        c->cork = loop->cork.app_us <= ORIBI_CORK_APP_US;
    }
    if (c->corked && !c->cork && oribi_conn_flush(c) < 0)
        oribi_conn_discard_output(c); /* gone: its response's write says so */
    c->corked = 0;
}

int cork_finish(struct oribi_loop *loop, struct oribi_conn *c)
{
    if (c->piped_us) { /* the app's time for pipelined requests, a moving average */
        loop->cork.app_us += (oribi_mono_us() - c->piped_us - loop->cork.app_us) / 8;
        c->piped_us = 0;
    }
    /* A response held back for the next ones stays so if its conn goes on
     * (kept alive, its next request there); else it goes out now. */
    int cork = c->cork;
    c->cork = 0;
    if (!cork || !oribi_conn_pending(c))
        return 0;
    if (c->keepalive && c->file_fd < 0 && c->len > c->rest_off &&
        oribi_pending_push(&loop->cork.held, &loop->cork.n, &loop->cork.cap, c, c->gen) == 0) {
        c->corked = 1;
        return 0;
    }
    return oribi_conn_flush(c) < 0 ? -1 : 0;
}

int cork_release(struct oribi_conn *c)
{
    c->corked = 0;
    return oribi_conn_flush(c);
}

/* Before the loop waits, when a conn's pipeline has run out, and at the
 * latest when the scheduler looks at the other conns (SCHED_LOOK_US). A
 * conn the app has again is off the list (cork_take): its next response
 * takes them along. A peer gone drops them; its next read or write finds
 * it so. */
void flush_corked(struct oribi_loop *loop)
{
    struct oribi_cork *k = &loop->cork;
    for (int i = 0; i < k->n; i++) {
        struct oribi_conn *c = k->held[i].conn;
        if (c->gen != k->held[i].gen || !c->corked)
            continue;
        /* What the socket does not take now waits for its next write, or
         * for the edge on_conn_event flushes at. */
        if (cork_release(c) < 0)
            oribi_conn_discard_output(c);
    }
    k->n = 0;
}

void cork_free(struct oribi_cork *k)
{
    free(k->held);
    k->held = NULL;
    k->n = k->cap = 0;
}
