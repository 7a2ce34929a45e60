/*
 * The loop's poll before sleep (ext/oribi/loop/spin.c) without a poller or
 * a clock: sequences of waits (how long each took, whether something came)
 * go in, and the budget the next wait polls for is checked. Run by rake
 * test:unit; exits non-zero on the first budget that differs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "loop/spin.h"

#define MAX 50 /* busy_poll, µs */

static int failures;

static void expect(const struct oribi_spin *s, int64_t want, const char *what)
{
    if (s->budget_us != want) {
        fprintf(stderr, "%s: budget %lld µs, want %lld\n", what, (long long)s->budget_us, (long long)want);
        failures++;
    }
}

int main(void)
{
    struct oribi_spin s = {0};

    /* A worker without load sleeps at once: long waits leave no budget. */
    oribi_spin_waited(&s, 30000, 1, MAX);
    expect(&s, 0, "a long wait");
    oribi_spin_waited(&s, 5000, 0, MAX);
    expect(&s, 0, "a timer");

    /* Under load: a short wait (asleep, the next event came 10 µs later)
     * buys twice that; a shorter one keeps what there is. */
    oribi_spin_waited(&s, 10, 1, MAX);
    expect(&s, 20, "a 10 µs wait");
    oribi_spin_waited(&s, 1, 1, MAX);
    expect(&s, 20, "a 1 µs wait after it");
    oribi_spin_waited(&s, 40, 1, MAX);
    expect(&s, MAX, "a 40 µs wait: capped");

    /* The load goes: each long wait halves it, down to none. */
    oribi_spin_waited(&s, 2000, 1, MAX);
    expect(&s, MAX / 2, "one long wait");
    oribi_spin_waited(&s, MAX, 0, MAX); /* polled the budget, then a timer: nothing came */
    expect(&s, MAX / 4, "a wait that found nothing");
    for (int i = 0; i < 8; i++)
        oribi_spin_waited(&s, 2000, 1, MAX);
    expect(&s, 0, "long waits");

    /* From none, a tiny wait still buys the least budget worth a poll. */
    oribi_spin_waited(&s, 0, 1, MAX);
    expect(&s, SPIN_MIN_US, "a wait that found something at once");

    /* An interrupted wait (a signal) is no evidence of load. */
    oribi_spin_waited(&s, 3, 0, MAX);
    expect(&s, 0, "an interrupted wait halves it");

    if (failures)
        return 1;
    puts("spin: ok");
    return 0;
}
