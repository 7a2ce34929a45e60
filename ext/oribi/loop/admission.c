/*
 * Admission (admission.h): whether this worker takes a connection from
 * the backlog now, from its own state, the loop's view and the workers'
 * shared counts.
 */
#include "loop/admission.h"

/* More than its share of the workers' connections, by ORIBI_SHARE_SLACK. */
static int over_share(const struct oribi_score_head *h, unsigned nconns)
{
    uint64_t workers = __atomic_load_n(&h->workers, __ATOMIC_RELAXED);
    uint64_t conns = __atomic_load_n(&h->conns, __ATOMIC_RELAXED);
    return workers > 1 && (uint64_t)nconns * workers > conns + ORIBI_SHARE_SLACK * workers;
}

static int others_wait(const struct oribi_score_head *h)
{
    return __atomic_load_n(&h->waiting, __ATOMIC_RELAXED) > 0;
}

/* Not one a waiting worker will take, nor over its share. */
static int may_take(const struct oribi_admit_view *v)
{
    const struct oribi_score_head *h = v->shared;
    return !h || (!others_wait(h) && !over_share(h, v->nconns));
}

/* Over its share while another worker waits, or while it holds more than
 * ORIBI_SHARE_SLACK kept-alive clients: the others take the backlog when
 * they next look. (In a burst of keep-alive clients the worker that took
 * the first ones is busy with them, never asleep, while the next ones
 * connect, and the one asleep took every one of them, up to 45 of 50. A
 * load of a connection per request keeps no clients and is not held up.) */
static int leave_to_others(const struct oribi_admit_view *v)
{
    const struct oribi_score_head *h = v->shared;
    return over_share(h, v->nconns) && (others_wait(h) || v->nkept > ORIBI_SHARE_SLACK);
}

/* Woken with the backlog readable, behind the others and over its share:
 * the backlog is theirs (a connection that comes wakes one waiting first;
 * one that came while this one was first in the queue, it takes after
 * ORIBI_ASIDE_US). The listeners leave the poller meanwhile (accepts are
 * closed): level-triggered, they would wake it again at once and it would
 * take what the others were woken for before they get a CPU. */
static int stand_aside(struct oribi_admission *a, const struct oribi_admit_view *v)
{
    if (!v->shared || !a->behind || a->aside_owed || !leave_to_others(v))
        return 0;
    a->aside_until = v->now_us + ORIBI_ASIDE_US;
    return 1;
}

/* The listeners open and no stop closing them, no pause after EMFILE (over
 * once its time has come), no standing aside, an app thread free, and
 * room, if need be by shedding (a full worker may have room again without
 * a close: a conn that went idle can be shed). */
static int is_open(const struct oribi_admission *a, const struct oribi_admit_view *v)
{
    return v->listening && (!a->resume_at || a->resume_at <= v->now_ms) && !a->aside_until && !v->hold && v->room;
}

int oribi_admit(struct oribi_admission *a, const struct oribi_admit_view *v, enum oribi_admit_at at)
{
    if (!is_open(a, v))
        return 0;
    switch (at) {
    case ADMIT_AGAIN:
        return 1;
    case ADMIT_TURN: /* the scheduler weighed the queue already */
        return may_take(v);
    case ADMIT_DRAIN:
        return !v->queued;
    case ADMIT_RUN:
    case ADMIT_POLLED:
        return !v->queued && may_take(v);
    case ADMIT_WOKEN: /* woken for it: this worker was the one waiting */
        return !v->queued && !stand_aside(a, v);
    }
    return 0;
}

int oribi_admit_listen(struct oribi_admission *a, const struct oribi_admit_view *v, int *requeue)
{
    if (a->resume_at && a->resume_at <= v->now_ms)
        a->resume_at = 0;
    int on = is_open(a, v);
    *requeue = on && a->requeue;
    a->requeue = 0;
    return on;
}

/* The first in the kernel's queue of waiters is woken for every connection
 * that comes while it sleeps: clients that connect one after the other,
 * each a little after the last, would all go to it. When no other worker
 * sleeps, it is still woken. */
void oribi_admit_sleeps(struct oribi_admission *a, const struct oribi_admit_view *v)
{
    if (!v->shared || !is_open(a, v))
        return;
    if (!over_share(v->shared, v->nconns))
        a->behind = 0;
    else if (!a->behind)
        a->behind = a->requeue = 1;
}

/* Then it takes at least one before it stands aside again. */
void oribi_admit_turn(struct oribi_admission *a, const struct oribi_admit_view *v)
{
    if (!a->aside_until)
        return;
    int late = v->now_us >= a->aside_until;
    if (!late && leave_to_others(v))
        return;
    a->aside_until = 0;
    a->aside_owed = late;
}

void oribi_admit_took(struct oribi_admission *a)
{
    a->aside_owed = 0;
}

void oribi_admit_pause(struct oribi_admission *a, int64_t now_ms)
{
    a->resume_at = now_ms + ORIBI_ACCEPT_PAUSE_MS;
}

void oribi_admit_stop(struct oribi_admission *a)
{
    a->resume_at = 0;
}

int64_t oribi_admit_deadline(const struct oribi_admission *a, int64_t now_ms)
{
    int64_t at = a->resume_at ? a->resume_at : -1;
    if (a->aside_until && (at < 0 || now_ms + 1 < at))
        at = now_ms + 1; /* back within ORIBI_ASIDE_US: a millisecond */
    return at;
}
