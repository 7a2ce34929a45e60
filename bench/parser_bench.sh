#!/bin/sh
# Times the request parser on picohttpparser's bench request (or FILE), and,
# given a picohttpparser checkout, picohttpparser beside it in the same
# process with the same flags and loop, printing both medians and the ratio
# (Oribi's time / picohttpparser's: under 1.00 is Oribi faster).
#   SIMD:     the build the gem ships (-O2, path chosen at run time: AVX2
#             where the CPU has it) against picohttpparser -O2 -msse4.2
#   SSE4.2:   the same build held to SSE4.2 (ORIBI_NO_AVX2=1)
#   portable: -DORIBI_NO_SSE42_BUILD against picohttpparser without -msse4.2
# Usage: bench/parser_bench.sh [-p PICO_DIR] [REQUEST_FILE|-] [ITERATIONS]
# (get picohttpparser with: git clone https://github.com/h2o/picohttpparser)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
pico=
if [ "${1:-}" = "-p" ]; then
    pico=$(cd "$2" && pwd)
    shift 2
fi
file=${1:--}
iterations=${2:-10000000}
cc=${CC:-cc}
flags="-O2 -Wall -Wextra -std=gnu11"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

build() { # NAME ORIBI_FLAGS PICO_FLAGS
    if [ -n "$pico" ]; then
        $cc $flags $3 -c -o "$out/$1-pico.o" "$pico/picohttpparser.c"
        $cc $flags $2 -DWITH_PICO -I"$root/ext/oribi" -I"$pico" -o "$out/$1" \
            "$root/bench/parser_bench.c" "$root/ext/oribi/http/parser.c" "$out/$1-pico.o"
    else
        $cc $flags $2 -I"$root/ext/oribi" -o "$out/$1" "$root/bench/parser_bench.c" "$root/ext/oribi/http/parser.c"
    fi
}
build simd "" -msse4.2
build portable -DORIBI_NO_SSE42_BUILD ""

printf '%-10s' "SIMD:"; "$out/simd" "$file" "$iterations"
printf '%-10s' "SSE4.2:"; ORIBI_NO_AVX2=1 "$out/simd" "$file" "$iterations"
printf '%-10s' "portable:"; "$out/portable" "$file" "$iterations"
