#!/usr/bin/env bash
# Seconds from a fresh clone to the first 200 of the README's first command
# (bundle install of what serving needs, the server's extension built, two
# workers serving examples/hello.ru), gems from the registry into an empty
# bundle path:
#
#   bench/first_request.sh [CHECKOUT (this one)] [PORT (39292)]
#
# It clones CHECKOUT's HEAD into a temporary directory, so the working tree
# is left alone.
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
port=${2:-39292}
work=$(mktemp -d)
trap 'kill -TERM -- -"$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
git clone -q "$src" "$work/oribi"
cd "$work/oribi"
cmd=$(awk '/^```$/ { getline; print; exit }' README.md)
cmd=${cmd/oribi -w 2/oribi -b tcp://127.0.0.1:$port -w 2}
echo "first command: $cmd"
start=$(date +%s.%N)
setsid env -u BUNDLE_GEMFILE -u RUBYOPT -u BUNDLE_BIN_PATH BUNDLE_PATH="$work/bundle" \
  bash -c "$cmd" > "$work/log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do # 300 s at most
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null)" = 200 ]; then
    awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "first 200 after %.1f s\n", e - s }'
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || { tail -n 20 "$work/log"; echo "the command exited"; exit 1; }
  sleep 0.1
done
tail -n 20 "$work/log"
echo "no 200 in 300 s"
exit 1
