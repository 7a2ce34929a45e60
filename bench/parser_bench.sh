#!/bin/sh
# Builds bench/parser_bench.c three ways and runs each over the request file:
#   -O2 -msse4.2          SSE4.2 known at compile time (picohttpparser's setup)
#   -O2                   one build for every CPU, SSE4.2 chosen at run time
#   -O2, ORIBI_NO_SSE42=1 the same build forced onto the portable path
# Usage: bench/parser_bench.sh [REQUEST_FILE] [ITERATIONS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-$root/../shared/bench-request.http}
iterations=${2:-10000000}
cc=${CC:-cc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

src="$root/bench/parser_bench.c $root/ext/oribi/http/parser.c"
$cc -O2 -Wall -Wextra -std=gnu11 -msse4.2 -I"$root/ext/oribi" -o "$out/bench-sse42" $src
$cc -O2 -Wall -Wextra -std=gnu11 -I"$root/ext/oribi" -o "$out/bench" $src

printf '%-28s' "-O2 -msse4.2:"; "$out/bench-sse42" "$file" "$iterations"
printf '%-28s' "-O2 (run-time dispatch):"; "$out/bench" "$file" "$iterations"
printf '%-28s' "-O2, portable path:"; ORIBI_NO_SSE42=1 "$out/bench" "$file" "$iterations"
