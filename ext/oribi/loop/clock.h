/*
 * The clocks, at the bottom of everything: the loop's coarse millisecond
 * (timers, one per wakeup) and a precise microsecond (queue times, the
 * scoreboard). Both CLOCK_MONOTONIC through the vDSO: no system call.
 */
#ifndef ORIBI_CLOCK_H
#define ORIBI_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC_COARSE in milliseconds (a tick of 1-4 ms). */
static inline int64_t oribi_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CLOCK_MONOTONIC in microseconds. */
static inline int64_t oribi_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
