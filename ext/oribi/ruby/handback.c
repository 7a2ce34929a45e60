#include "ruby/handback.h"

#include <ruby.h>
#include <stdlib.h>

static void give_back(struct oribi_handbacks *h, struct oribi_conn *c, int detach)
{
    if (h->direct && rb_thread_current() == *h->dispatcher) {
        if (detach)
            oribi_loop_detach(h->loop, c);
        else
            oribi_loop_finish(h->loop, c);
        return;
    }
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 16;
        struct oribi_handback *p = realloc(h->list, (size_t)cap * sizeof(*p));
        if (!p)
            rb_raise(rb_eNoMemError, "handback list");
        h->list = p;
        h->cap = cap;
    }
    h->list[h->n++] = (struct oribi_handback){c, detach};
    if (*h->in_loop)
        oribi_loop_wake(h->loop);
}

void oribi_handback(struct oribi_handbacks *h, struct oribi_conn *c)
{
    give_back(h, c, 0);
}

void oribi_handback_detach(struct oribi_handbacks *h, struct oribi_conn *c)
{
    oribi_loop_unwatch(h->loop, c);
    give_back(h, c, 1);
}

void oribi_handbacks_drain(struct oribi_handbacks *h)
{
    for (int i = 0; i < h->n; i++) {
        struct oribi_handback *b = &h->list[i];
        if (b->detach)
            oribi_loop_detach(h->loop, b->c);
        else
            oribi_loop_finish(h->loop, b->c);
    }
    h->n = 0;
}

void oribi_handbacks_free(struct oribi_handbacks *h)
{
    free(h->list);
    h->list = NULL;
    h->n = h->cap = 0;
}
