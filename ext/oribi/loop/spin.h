/*
 * busy_poll: how long the loop polls before it sleeps. Waking a sleeping
 * worker costs whoever wakes it (a client's write, a connect): the kernel
 * has to get a CPU to it, and a CPU gone idle first has to be woken
 * itself, which in a virtual machine is an exit to the host. Under load
 * the next event often comes within microseconds of the last; a worker
 * that sleeps for each one pays that every time, and its CPU sits idle
 * between them while its clients wait. With busy_poll the loop polls
 * without sleeping for a while first, as long as the waits before ended
 * that soon: a short one raises the budget to twice its length (busy_poll
 * at most), a long one halves it, so that a worker without load soon
 * sleeps at once again and burns nothing. The polling takes a CPU that
 * others sharing it may want, hence off by default: for workers with CPUs
 * of their own. A policy and nothing else: it reads no clock and owns no
 * poller (poll_events in loop.c does; test/unit/spin.c drives it).
 */
#ifndef ORIBI_SPIN_H
#define ORIBI_SPIN_H

#include <stdint.h>

#define SPIN_MIN_US 4 /* a budget under this is none */

struct oribi_spin {
    int64_t budget_us; /* how long the next wait polls first, 0: it sleeps at once */
};

/* A wait ended after waited_us, from its start (polling or asleep); found:
 * it ended because something came (not a timer, not an interruption).
 * max_us: busy_poll, the budget's cap. */
void oribi_spin_waited(struct oribi_spin *s, int64_t waited_us, int found, int64_t max_us);

#endif
