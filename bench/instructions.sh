#!/usr/bin/env bash
# Instructions per run in flight, counted by valgrind's cachegrind: a figure no neighbour on
# the machine moves, for when runs/s pairs are too noisy to judge a few per cent.
#
#   bench/instructions.sh BINARY [BINARY ...]      # SMALL=5000 LARGE=20000 INFLIGHT=100
#
# Each binary runs `bench` twice under cachegrind, SMALL and LARGE runs in flight (each after
# the bench's own warm-up runs); the difference of the two totals over LARGE - SMALL runs is
# what one run costs, start-up and warm-up cancelled out. Needs valgrind; takes a few minutes
# per binary.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/instructions.sh BINARY [BINARY ...]" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "bench/instructions.sh: valgrind is not installed" >&2; exit 2; }
SMALL=${SMALL:-5000}
LARGE=${LARGE:-20000}
INFLIGHT=${INFLIGHT:-100}
WORK=${WORK:-/tmp/rolegate-bench}
mkdir -p "$WORK"

total() {  # instructions of one `bench` run of binary $1 with $2 runs in flight
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$1" bench --sequential 0 --concurrent "$2" --inflight "$INFLIGHT" --parked 0 --envelope-rounds 0 \
    > /dev/null 2> "$WORK/cachegrind.err" || true
  sed -n 's/.*I *refs: *//p' "$WORK/cachegrind.err" | tr -d ','
}

for bin in "$@"; do
  small=$(total "$bin" "$SMALL")
  large=$(total "$bin" "$LARGE")
  [ -n "$small" ] && [ -n "$large" ] || { echo "$bin: cachegrind gave no total (see $WORK/cachegrind.err)" >&2; exit 1; }
  echo "$bin: $SMALL runs $small, $LARGE runs $large, per run $(( (large - small) / (LARGE - SMALL) )) instructions"
done
