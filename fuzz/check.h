/* The fuzz targets' assertion: a failed check is a crash libFuzzer keeps. */
#ifndef ORIBI_FUZZ_CHECK_H
#define ORIBI_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#endif
