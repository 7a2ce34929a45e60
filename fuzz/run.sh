#!/bin/sh
# Builds a libFuzzer target (ASan + UBSan) into fuzz/build/ and fuzzes for
# SECONDS (default 60) from its seeds plus the corpus it keeps.
# TARGET=parser (default: fuzz/parser_fuzz.c, the request/response parser
# and chunked decoder; seeds fuzz/seeds/, corpus fuzz/corpus-run/) or
# TARGET=query (fuzz/query_fuzz.c, fast_query_parser's splitting and
# decoding; seeds fuzz/seeds-query/, corpus fuzz/corpus-query/) or
# TARGET=results (fuzz/results_fuzz.c, the records of `oribi bench
# --output` files and their HdrHistogram encoding; seeds
# fuzz/seeds-results/, corpus fuzz/corpus-results/) or TARGET=proxy
# (fuzz/proxy_fuzz.c, the PROXY protocol header, v1 and v2; seeds
# fuzz/seeds-proxy/, corpus fuzz/corpus-proxy/). Exits non-zero when a crash is found; the input that
# crashed is left in fuzz/build/ (crash-*), ready to become a regression test.
# JOBS=N runs N fuzzing processes in parallel. RUNS=N stops after N
# executions instead (SECONDS then only caps the time; 0 = no cap).
# Usage: [TARGET=query] fuzz/run.sh [SECONDS]
set -eu
seconds=${1:-60}
jobs=${JOBS:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${TARGET:-parser}
build=$root/fuzz/build
case $target in
parser) corpus=$root/fuzz/corpus-run seeds=$root/fuzz/seeds sources=$root/ext/oribi/http/chunked.c ;;
query) corpus=$root/fuzz/corpus-query seeds=$root/fuzz/seeds-query sources=$root/ext/oribi/http/query.c ;;
results)
    corpus=$root/fuzz/corpus-results seeds=$root/fuzz/seeds-results
    sources="$root/oribi-bench/ext/oribi_bench/results.c $root/oribi-bench/ext/oribi_bench/histogram.c $root/oribi-bench/ext/oribi_bench/loadgen_series.c"
    ;;
proxy) corpus=$root/fuzz/corpus-proxy seeds=$root/fuzz/seeds-proxy sources=$root/ext/oribi/http/proxy_protocol.c ;;
*) echo "TARGET must be parser, query, results or proxy" >&2; exit 2 ;;
esac
mkdir -p "$build" "$corpus"

${CLANG:-clang} -g -O1 -std=gnu11 -Wall -Wextra -Wno-unused-function \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/ext/oribi" -I"$root/oribi-bench/ext/oribi_bench" -o "$build/${target}_fuzz" \
    "$root/fuzz/${target}_fuzz.c" $sources

cd "$build"
set -- -max_total_time="$seconds" -runs="${RUNS:--1}" -max_len=8192 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/" "$corpus" "$seeds"
if [ "$jobs" -gt 1 ]; then
    exec "./${target}_fuzz" -jobs="$jobs" -workers="$jobs" "$@"
fi
exec "./${target}_fuzz" "$@"
