/*
 * Parser micro-benchmark: the loop of picohttpparser's bench.c over the same
 * browser request (703 bytes, 9 fields), so that ns/parse compare across
 * parsers on one machine. Built with -DWITH_PICO (and picohttpparser.c from
 * a checkout), it times phr_parse_request too, in alternating rounds in the
 * same process, and prints the medians and the median of the rounds' ratios
 * (each ratio from two rounds run back to back, so that a neighbour's load
 * weighs on both alike).
 * Usage: parser_bench [FILE] [ITERATIONS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "http/parser.h"
#ifdef WITH_PICO
#include "picohttpparser.h"
#endif

#define ROUNDS 21

/* picohttpparser's bench.c request */
static const char default_request[] =
    "GET /wp-content/uploads/2010/03/hello-kitty-darth-vader-pink.jpg HTTP/1.1\r\n"
    "Host: www.kittyhell.com\r\n"
    "User-Agent: Mozilla/5.0 (Macintosh; U; Intel Mac OS X 10.6; ja-JP-mac; rv:1.9.2.3) Gecko/20100401 "
    "Firefox/3.6.3 Pathtraq/0.9\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Language: ja,en-us;q=0.7,en;q=0.3\r\n"
    "Accept-Encoding: gzip,deflate\r\n"
    "Accept-Charset: Shift_JIS,utf-8;q=0.7,*;q=0.7\r\n"
    "Keep-Alive: 115\r\n"
    "Connection: keep-alive\r\n"
    "Cookie: wp_ozh_wsa_visits=2; wp_ozh_wsa_visit_lasttime=xxxxxxxxxx; "
    "__utma=xxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.xxxxxxxxxx.x; "
    "__utmz=xxxxxxxxx.xxxxxxxxxx.x.x.utmccn=(referral)|utmcsr=reader.livedoor.com|utmcct=/reader/"
    "|utmcmd=referral\r\n"
    "\r\n";

static char buf[65536];
static size_t len;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per parse over n parses; exits when a parse fails, which also keeps
 * the compiler from dropping the calls */
static double time_oribi(long n, size_t *fields)
{
    struct oribi_header headers[32];
    struct oribi_request req;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int r;
        req.headers = headers;
        req.num_headers = sizeof(headers) / sizeof(headers[0]);
        r = oribi_parse_request(buf, len, 0, &req, NULL);
        if (r != (int)len) {
            fprintf(stderr, "oribi: parse failed: %d (status %d)\n", r, req.status);
            exit(1);
        }
    }
    *fields = req.num_headers;
    return (now_ns() - t0) / n;
}

#ifdef WITH_PICO
static double time_pico(long n)
{
    struct phr_header headers[32];
    const char *method, *path;
    size_t method_len, path_len, num_headers;
    int minor_version;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int r;
        num_headers = sizeof(headers) / sizeof(headers[0]);
        r = phr_parse_request(buf, len, &method, &method_len, &path, &path_len, &minor_version, headers, &num_headers,
                              0);
        if (r != (int)len) {
            fprintf(stderr, "picohttpparser: parse failed: %d\n", r);
            exit(1);
        }
    }
    return (now_ns() - t0) / n;
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median, and the spread as (max - min) / median */
static double median(double *v, int n, double *spread)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    *spread = (v[n - 1] - v[0]) / v[n / 2];
    return v[n / 2];
}

int main(int argc, char **argv)
{
    long iterations = argc > 2 ? atol(argv[2]) : 10000000L;
    long per_round = iterations / ROUNDS > 0 ? iterations / ROUNDS : 1;
    double oribi[ROUNDS], spread;
    size_t fields = 0;
    const char *path = "built-in request";

    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        FILE *f = fopen(argv[1], "rb");
        if (f == NULL) {
            fprintf(stderr, "usage: %s [request-file|-] [iterations]\n", argv[0]);
            return 2;
        }
        len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        path = argv[1];
    } else {
        len = sizeof(default_request) - 1;
        memcpy(buf, default_request, len);
    }

#ifdef WITH_PICO
    double pico[ROUNDS], ratio[ROUNDS], pico_spread, ratio_spread;
    for (int r = 0; r < ROUNDS; r++) {
        oribi[r] = time_oribi(per_round, &fields);
        pico[r] = time_pico(per_round);
        ratio[r] = oribi[r] / pico[r];
    }
    double o = median(oribi, ROUNDS, &spread), p = median(pico, ROUNDS, &pico_spread);
    double q = median(ratio, ROUNDS, &ratio_spread);
    /* sorted by median(): [0] is the fastest round, the least disturbed */
    printf("oribi %.1f ns/parse (±%.0f%%), picohttpparser %.1f ns (±%.0f%%), ratio %.2f (±%.0f%%), "
           "fastest rounds' ratio %.2f (%s path; %s, %zu bytes, %zu fields, %d rounds of %ld)\n",
           o, spread * 50, p, pico_spread * 50, q, ratio_spread * 50, oribi[0] / pico[0], oribi_parser_path(), path,
           len, fields, ROUNDS, per_round);
#else
    for (int r = 0; r < ROUNDS; r++)
        oribi[r] = time_oribi(per_round, &fields);
    double o = median(oribi, ROUNDS, &spread);
    printf("oribi %.1f ns/parse (±%.0f%%) (%s path; %s, %zu bytes, %zu fields, %d rounds of %ld)\n", o, spread * 50,
           oribi_parser_path(), path, len, fields, ROUNDS, per_round);
#endif
    return 0;
}
