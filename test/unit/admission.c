/*
 * Admission (ext/oribi/loop/admission.c) without sockets or a clock: what
 * the loop holds (the view), what the workers share (a score head) and
 * events (a connection taken, EMFILE, a stop, a sleep, a loop turn) go in
 * sequence, and the answer at each place the loop asks is checked. Run by
 * rake test:unit (and so by test:tsan); exits non-zero if any differs.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"

#include "loop/admission.h"

static const enum oribi_admit_at ALL[] = {ADMIT_WOKEN, ADMIT_POLLED, ADMIT_TURN, ADMIT_RUN, ADMIT_DRAIN, ADMIT_AGAIN};
static const char *const NAMES[] = {"woken", "polled", "turn", "run", "drain", "again"};
#define NALL (int)(sizeof(ALL) / sizeof(ALL[0]))

struct world {
    struct oribi_admission a;
    struct oribi_admit_view v;
    struct oribi_score_head head;
};

/* A worker that may take: listeners open, a thread free, room, nothing queued. */
static void world_init(struct world *w, int shared)
{
    memset(w, 0, sizeof(*w));
    w->v = (struct oribi_admit_view){.listening = 1, .room = 1, .now_ms = 1000, .now_us = 1000000};
    w->v.shared = shared ? &w->head : NULL;
}

/* Two workers, ten connections between them: a worker may hold 5 + 2
 * (ORIBI_SHARE_SLACK). This one holds nconns. */
static void two_workers(struct world *w, unsigned nconns)
{
    world_init(w, 1);
    w->head.workers = 2;
    w->head.conns = 10;
    w->v.nconns = nconns;
}

static int admit(struct world *w, enum oribi_admit_at at)
{
    return oribi_admit(&w->a, &w->v, at);
}

static int listen_on(struct world *w, int *requeue)
{
    int r;
    return oribi_admit_listen(&w->a, &w->v, requeue ? requeue : &r);
}

static void advance_us(struct world *w, int64_t us)
{
    w->v.now_us += us;
    w->v.now_ms = w->v.now_us / 1000;
}

/* Every place asked: each answer as want[i] says (want "11110" ...). */
static void answers(struct world *w, const char *what, const char *want)
{
    for (int i = 0; i < NALL; i++) {
        struct oribi_admission before = w->a;
        int got = admit(w, ALL[i]);
        w->a = before; /* a question's side effect (standing aside) is its own test's */
        CHECK(got == (want[i] == '1'), "%s: %s answered %d", what, NAMES[i], got);
    }
}

/* Alone: what the loop holds decides; a pause after EMFILE lasts its time;
 * a stop ends it. */
static void test_alone(void)
{
    struct world w;
    world_init(&w, 0);
    answers(&w, "open", "111111");
    CHECK(listen_on(&w, NULL) == 1, "listeners out of the poller with nothing to stop them");
    w.v.hold = 1;
    answers(&w, "every thread busy", "000000");
    CHECK(listen_on(&w, NULL) == 0, "listeners in the poller while every thread is busy");
    w.v.hold = 0;
    w.v.room = 0;
    answers(&w, "no room", "000000");
    w.v.room = 1;
    w.v.listening = 0;
    answers(&w, "listeners closed", "000000");
    w.v.listening = 1;

    oribi_admit_pause(&w.a, w.v.now_ms);
    answers(&w, "paused", "000000");
    CHECK(oribi_admit_deadline(&w.a, w.v.now_ms) == w.v.now_ms + ORIBI_ACCEPT_PAUSE_MS,
          "the pause's end is not a deadline");
    advance_us(&w, (ORIBI_ACCEPT_PAUSE_MS - 1) * 1000);
    CHECK(listen_on(&w, NULL) == 0, "the pause ended early");
    advance_us(&w, 1000);
    CHECK(listen_on(&w, NULL) == 1, "the pause outlasted its time");
    CHECK(oribi_admit_deadline(&w.a, w.v.now_ms) == -1, "a deadline with no pause and no standing aside");
    oribi_admit_pause(&w.a, w.v.now_ms);
    oribi_admit_stop(&w.a);
    answers(&w, "a stop ends the pause", "111111");
}

/* A request waiting for the app goes before a new connection, except when
 * the scheduler gives the backlog its turn (it weighed the queue). */
static void test_queued(void)
{
    struct world w;
    world_init(&w, 0);
    w.v.queued = 1;
    answers(&w, "a request queued", "001001");
}

/* Two workers, 10 connections between them: a worker may hold 5 + 2.
 * Over that it takes none but what the kernel woke it for; nor while
 * another worker waits in the poller, which the kernel wakes for it. */
static void test_share(void)
{
    struct world w;
    two_workers(&w, 7);
    answers(&w, "within its share", "111111");
    w.v.nconns = 8;
    answers(&w, "over its share", "100011");
    w.v.nconns = 1;
    w.head.waiting = 1;
    answers(&w, "another worker waits", "100011");
    w.head.workers = 1;
    w.head.waiting = 0;
    w.v.nconns = 10;
    answers(&w, "the only worker holds them all", "111111");
}

/* Over its share, a worker about to sleep goes behind the others once (out
 * of the poller and in again), and again only after it was within it. */
static void test_going_behind(void)
{
    struct world w;
    two_workers(&w, 8);
    int requeue;
    oribi_admit_sleeps(&w.a, &w.v);
    CHECK(listen_on(&w, &requeue) == 1 && requeue == 1, "over its share: not behind the others");
    oribi_admit_sleeps(&w.a, &w.v);
    CHECK(listen_on(&w, &requeue) == 1 && requeue == 0, "behind the others twice in a row");
    w.v.nconns = 5;
    oribi_admit_sleeps(&w.a, &w.v);
    w.v.nconns = 8;
    oribi_admit_sleeps(&w.a, &w.v);
    CHECK(listen_on(&w, &requeue) == 1 && requeue == 1, "over its share again: not behind the others");
    w.v.hold = 1;
    w.v.nconns = 5;
    oribi_admit_sleeps(&w.a, &w.v);
    w.v.hold = 0;
    CHECK(w.a.behind == 1, "a worker that may not take changed its place");
}

/* Woken while behind and over its share with another waiting: it stands
 * aside (listeners out, nothing taken) until the others no longer want the
 * backlog or ORIBI_ASIDE_US went by; then it takes one before it stands
 * aside again. */
static void test_standing_aside(void)
{
    struct world w;
    two_workers(&w, 8);
    oribi_admit_sleeps(&w.a, &w.v);
    w.head.waiting = 1;
    CHECK(admit(&w, ADMIT_WOKEN) == 0, "woken behind and over its share: took the others' connection");
    answers(&w, "standing aside", "000000");
    CHECK(listen_on(&w, NULL) == 0, "listeners in the poller while standing aside");
    CHECK(oribi_admit_deadline(&w.a, w.v.now_ms) == w.v.now_ms + 1, "standing aside without a deadline");
    advance_us(&w, ORIBI_ASIDE_US - 1);
    oribi_admit_turn(&w.a, &w.v);
    answers(&w, "still aside", "000000");
    advance_us(&w, 1);
    oribi_admit_turn(&w.a, &w.v);
    CHECK(admit(&w, ADMIT_WOKEN) == 1, "back from standing aside, owed one: refused");
    CHECK(admit(&w, ADMIT_WOKEN) == 1, "owed one, still owed until one is taken: refused");
    oribi_admit_took(&w.a);
    CHECK(admit(&w, ADMIT_WOKEN) == 0, "took its one: did not stand aside again");

    /* the others stop waiting, and it keeps few clients: back at once, owing nothing */
    w.head.waiting = 0;
    w.v.nkept = ORIBI_SHARE_SLACK;
    oribi_admit_turn(&w.a, &w.v);
    CHECK(w.a.aside_until == 0 && w.a.aside_owed == 0, "aside when no other wanted the backlog");
    answers(&w, "back early", "100011");
    /* many kept-alive clients: the backlog is left to the others even when none waits */
    w.v.nkept = ORIBI_SHARE_SLACK + 1;
    CHECK(admit(&w, ADMIT_WOKEN) == 0, "holding many kept-alive clients over its share: took from the backlog");
}

/* Alone, or not behind the others: woken, it always takes. */
static void test_no_aside_unless_behind(void)
{
    struct world w;
    two_workers(&w, 8);
    w.head.waiting = 1;
    CHECK(admit(&w, ADMIT_WOKEN) == 1, "not behind: stood aside");
    world_init(&w, 0);
    w.a.behind = 1;
    CHECK(admit(&w, ADMIT_WOKEN) == 1, "alone: stood aside");
}

int main(void)
{
    test_alone();
    test_queued();
    test_share();
    test_going_behind();
    test_standing_aside();
    test_no_aside_unless_behind();
    return checks_done("admission");
}
