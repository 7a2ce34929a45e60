/*
 * A list of conns as they were when put on it (the loop's pending and
 * corked lists): a conn closed and reused since has another gen, and its
 * entry is skipped.
 */
#ifndef ORIBI_PENDING_H
#define ORIBI_PENDING_H

#include <stdint.h>
#include <stdlib.h>

struct oribi_conn;

struct oribi_pending {
    struct oribi_conn *conn;
    uint32_t gen;
};

/* conn, whose gen is gen now, onto the list; 0, or -1 out of memory. */
static inline int oribi_pending_push(struct oribi_pending **list, int *n, int *cap, struct oribi_conn *conn,
                                     uint32_t gen)
{
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        struct oribi_pending *p = realloc(*list, (size_t)ncap * sizeof(*p));
        if (!p)
            return -1;
        *list = p;
        *cap = ncap;
    }
    (*list)[(*n)++] = (struct oribi_pending){conn, gen};
    return 0;
}

#endif
