/*
 * The unit tests' check: a condition that fails is printed with where and
 * what, and counted; main exits non-zero when any did.
 */
#ifndef ORIBI_UNIT_CHECK_H
#define ORIBI_UNIT_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                              \
            fputc('\n', stderr);                                       \
            failures++;                                                \
        }                                                              \
    } while (0)

/* main's exit status: how many checks failed, said, or "NAME: ok". */
static int checks_done(const char *name)
{
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
