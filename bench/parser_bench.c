/*
 * Parser micro-benchmark: the loop of picohttpparser's bench.c over the
 * same browser request, so ns/parse compare across parsers on one machine.
 * Usage: parser_bench FILE [ITERATIONS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "http/parser.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    static char buf[65536];
    struct oribi_header headers[32];
    struct oribi_request req;
    long iterations = argc > 2 ? atol(argv[2]) : 10000000L;
    size_t len;
    FILE *f;
    double t0, t1;

    if (argc < 2 || (f = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: %s bench-request.http [iterations]\n", argv[0]);
        return 2;
    }
    len = fread(buf, 1, sizeof(buf), f);
    fclose(f);

    t0 = now_ns();
    for (long i = 0; i < iterations; i++) {
        int r;
        req.headers = headers;
        req.num_headers = sizeof(headers) / sizeof(headers[0]);
        r = oribi_parse_request(buf, len, 0, &req, NULL);
        /* the compiler cannot drop a parse whose result is checked */
        if (r != (int)len) {
            fprintf(stderr, "parse failed: %d (status %d)\n", r, req.status);
            return 1;
        }
    }
    t1 = now_ns();
    printf("%.1f ns/parse (%ld parses, %zu bytes, %zu headers, %s path)\n", (t1 - t0) / iterations, iterations, len,
           req.num_headers, oribi_parser_simd() ? "SSE4.2" : "portable");
    return 0;
}
