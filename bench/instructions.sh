#!/usr/bin/env bash
# Instructions per run in flight, counted by valgrind's cachegrind: a figure no neighbour on
# the machine moves, for when runs/s pairs are too noisy to judge a few per cent.
#
#   bench/instructions.sh BINARY [BINARY ...]      # SMALL=5000 LARGE=20000 INFLIGHT=100 CACHE=0
#
# Each binary runs `bench` twice under cachegrind, SMALL and LARGE runs in flight (each after
# the bench's own warm-up runs); the difference of the two totals over LARGE - SMALL runs is
# what one run costs, start-up and warm-up cancelled out. With CACHE=1 cachegrind also models
# the caches and the script prints first-level data misses per run (reads and writes), the
# figure that tells a build touching more memory per run (try INFLIGHT=1000, as the pairs
# run). Needs valgrind; takes a few minutes per binary.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/instructions.sh BINARY [BINARY ...]" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "bench/instructions.sh: valgrind is not installed" >&2; exit 2; }
SMALL=${SMALL:-5000}
LARGE=${LARGE:-20000}
INFLIGHT=${INFLIGHT:-100}
CACHE=${CACHE:-0}
WORK=${WORK:-/tmp/rolegate-bench}
mkdir -p "$WORK"
sim=no
[ "$CACHE" = 1 ] && sim=yes

total() {  # "INSTRUCTIONS D1_MISSES" of one `bench` run of binary $1 with $2 runs in flight
  valgrind --tool=cachegrind --cache-sim="$sim" --cachegrind-out-file=/dev/null \
    "$1" bench --sequential 0 --concurrent "$2" --inflight "$INFLIGHT" --parked 0 --envelope-rounds 0 \
    > /dev/null 2> "$WORK/cachegrind.err" || true
  local refs misses
  refs=$(sed -n 's/.*I *refs: *//p' "$WORK/cachegrind.err" | tr -d ',')
  misses=$(sed -n 's/.*D1 *misses: *\([0-9,]*\).*/\1/p' "$WORK/cachegrind.err" | tr -d ',')
  # `-` for a total cachegrind did not print, so the check below still sees a failed run
  echo "${refs:--} ${misses:-0}"
}

for bin in "$@"; do
  read -r small small_misses <<< "$(total "$bin" "$SMALL")"
  read -r large large_misses <<< "$(total "$bin" "$LARGE")"
  [ "$small" != - ] && [ "$large" != - ] || { echo "$bin: cachegrind gave no total (see $WORK/cachegrind.err)" >&2; exit 1; }
  line="$bin: $SMALL runs $small, $LARGE runs $large, per run $(( (large - small) / (LARGE - SMALL) )) instructions"
  if [ "$CACHE" = 1 ]; then
    line="$line, $(( (large_misses - small_misses) / (LARGE - SMALL) )) first-level data misses"
  fi
  echo "$line"
done
