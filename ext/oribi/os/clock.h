/*
 * The clocks, at the bottom of everything: the loop's coarse millisecond
 * (timers, one per wakeup) and a precise microsecond (queue times, the
 * scoreboard). Both monotonic, read through the vDSO on Linux: no system
 * call.
 */
#ifndef ORIBI_CLOCK_H
#define ORIBI_CLOCK_H

#include <stdint.h>
#include <time.h>

/* The coarse monotonic clock where there is one (Linux's _COARSE, a tick
 * of 1-4 ms; FreeBSD's _FAST), else the precise one. */
#if defined(ORIBI_HAVE_CLOCK_MONOTONIC_COARSE)
#define ORIBI_COARSE_CLOCK CLOCK_MONOTONIC_COARSE
#elif defined(ORIBI_HAVE_CLOCK_MONOTONIC_FAST)
#define ORIBI_COARSE_CLOCK CLOCK_MONOTONIC_FAST
#else
#define ORIBI_COARSE_CLOCK CLOCK_MONOTONIC
#endif

/* The coarse clock in milliseconds. */
static inline int64_t oribi_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(ORIBI_COARSE_CLOCK, &ts);
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
