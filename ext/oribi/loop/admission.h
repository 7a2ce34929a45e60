/*
 * Admission: whether this worker takes a connection from the listen
 * backlog now. One question (oribi_admit), asked at every place the loop
 * may accept, the place its argument; update_listeners asks the same of
 * the poller (oribi_admit_listen). A policy and nothing else: it owns no
 * socket and reads no clock. Its state is its own (the pause after
 * EMFILE, going behind the other workers, standing aside); what it reads
 * of the loop (open listeners, a free app thread, room, its clients, a
 * request queued, the time, where the workers' shared counts are) the
 * loop passes in a view. test/unit/admission.c drives
 * it with event sequences alone.
 *
 * The rule between workers. The kernel wakes one of those asleep in the
 * poller with their listeners on for each connection that comes
 * (EPOLLEXCLUSIVE: the first in its queue of waiters; kqueue wakes them
 * all), and that one takes it. A busy worker takes one straight from the
 * backlog too (a turn between requests, an accept run), or no new
 * connection would be served before the kept-alive clients of a busy
 * worker are; but not one that a worker asleep for it will take, nor
 * while it holds more than its share of the workers' connections
 * (ORIBI_SHARE_SLACK more than an even split): the worker that was running
 * when a burst of keep-alive clients came would take them all while the
 * others wake, and serve them alone for as long as they stay. Over its
 * share, a worker also goes behind the others in the queue of waiters
 * (requeue), and leaves the backlog it finds on waking to a worker
 * waiting for it (standing aside). No connection waits for a worker that
 * is not coming: only one that a waiting worker will take is left, and
 * for ORIBI_ASIDE_US at most.
 */
#ifndef ORIBI_ADMISSION_H
#define ORIBI_ADMISSION_H

#include <stdint.h>

#include "loop/score.h"

#define ORIBI_SHARE_SLACK     2    /* connections over an even split a worker may hold and still take */
#define ORIBI_ASIDE_US        1000 /* how long a worker over its share leaves the backlog to others */
#define ORIBI_ACCEPT_PAUSE_MS 100  /* no accept for this long after EMFILE or ENFILE */

struct oribi_admission {
    int64_t resume_at;   /* ms: paused after EMFILE until then, 0 not */
    int behind;          /* over its share, its listeners went behind the others' */
    int requeue;         /* ... and go there at the next oribi_admit_listen */
    int64_t aside_until; /* µs: leaving the backlog to others until then, 0 not */
    int aside_owed;      /* stood aside until aside_until: takes one before it may again */
};

/* What the loop holds when it asks, and what the workers share. */
struct oribi_admit_view {
    const struct oribi_score_head *shared; /* the workers' counts (score.h), NULL when alone */
    int listening; /* listeners open, and no stop closes them (a draining stop serves the backlog) */
    int hold;      /* every app thread busy */
    int room;      /* room for one more connection, if need be by shedding one */
    int queued;    /* a complete request waits for the app */
    unsigned nconns, nkept;
    int64_t now_ms;
    int64_t now_us; /* the precise clock: read at ADMIT_WOKEN and by oribi_admit_turn only */
};

/* Where the question is asked. */
enum oribi_admit_at {
    ADMIT_WOKEN,  /* the poller woke this worker, asleep for it, with a listener readable */
    ADMIT_POLLED, /* the poller, asked without sleeping, found a listener readable */
    ADMIT_TURN,   /* the scheduler gives the backlog a turn before the next hand-out */
    ADMIT_RUN,    /* the next accept of a run straight from a busy listener */
    ADMIT_DRAIN,  /* a draining worker serves the backlog */
    ADMIT_AGAIN,  /* the next listener, within one accept */
};

/* 1: take a connection now. ADMIT_WOKEN may start standing aside. */
int oribi_admit(struct oribi_admission *a, const struct oribi_admit_view *v, enum oribi_admit_at at);

/* Before the poller is asked: whether the listeners are in it (1) and,
 * through requeue, whether they go out and in again first (behind the
 * others). Clears an EMFILE pause whose time has come. */
int oribi_admit_listen(struct oribi_admission *a, const struct oribi_admit_view *v, int *requeue);

/* Before the loop sleeps: over its share, its listeners go behind the
 * others' once (the next oribi_admit_listen), so that a connection wakes
 * another worker asleep first. */
void oribi_admit_sleeps(struct oribi_admission *a, const struct oribi_admit_view *v);

/* Standing aside now: the loop turn has something to look at. */
static inline int oribi_admit_aside(const struct oribi_admission *a)
{
    return a->aside_until != 0;
}

/* Every loop turn: back with the listeners once leaving the backlog to
 * others no longer holds, or ORIBI_ASIDE_US went by. */
void oribi_admit_turn(struct oribi_admission *a, const struct oribi_admit_view *v);

/* A connection was taken. */
void oribi_admit_took(struct oribi_admission *a);

/* accept failed for want of fds or memory: a pause. */
void oribi_admit_pause(struct oribi_admission *a, int64_t now_ms);

/* A stop: no pause, whatever was set. */
void oribi_admit_stop(struct oribi_admission *a);

/* When the loop must look again for admission's sake (ms), -1 never. */
int64_t oribi_admit_deadline(const struct oribi_admission *a, int64_t now_ms);

#endif
