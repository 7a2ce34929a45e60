/*
 * The loop's poll before sleep (spin.h): the budget follows the waits.
 */
#include "loop/spin.h"

void oribi_spin_waited(struct oribi_spin *s, int64_t waited_us, int found, int64_t max_us)
{
    if (found && waited_us <= max_us) {
        int64_t want = 2 * waited_us;
        want = want < SPIN_MIN_US ? SPIN_MIN_US : want > max_us ? max_us : want;
        if (want > s->budget_us)
            s->budget_us = want;
        return;
    }
    s->budget_us /= 2;
    if (s->budget_us < SPIN_MIN_US)
        s->budget_us = 0;
}
