#!/bin/sh
# Builds the libFuzzer target (ASan + UBSan) into fuzz/build/ and fuzzes for
# SECONDS (default 60) from fuzz/seeds/ plus the corpus kept in
# fuzz/corpus-run/. Exits non-zero when a crash is found; the input that
# crashed is left in fuzz/build/ (crash-*), ready to become a regression test.
# JOBS=N runs N fuzzing processes in parallel. RUNS=N stops after N
# executions instead (SECONDS then only caps the time; 0 = no cap).
# Usage: fuzz/run.sh [SECONDS]
set -eu
seconds=${1:-60}
jobs=${JOBS:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/fuzz/build
corpus=$root/fuzz/corpus-run
mkdir -p "$build" "$corpus"

${CLANG:-clang} -g -O1 -std=gnu11 -Wall -Wextra -Wno-unused-function \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root/ext/oribi" -o "$build/parser_fuzz" \
    "$root/fuzz/parser_fuzz.c" "$root/ext/oribi/http/chunked.c"

cd "$build"
set -- -max_total_time="$seconds" -runs="${RUNS:--1}" -max_len=8192 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/" "$corpus" "$root/fuzz/seeds"
if [ "$jobs" -gt 1 ]; then
    exec ./parser_fuzz -jobs="$jobs" -workers="$jobs" "$@"
fi
exec ./parser_fuzz "$@"
