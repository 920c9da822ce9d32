#!/usr/bin/env bash
# Two rolegate binaries next to the bare tokio floor, in alternating pairs, so the
# machine's drift between rounds hits both builds alike:
#
#   bench/pairs.sh OLD_BINARY NEW_BINARY   # PAIRS=6 N=300000 INFLIGHT=1000 PARKED=100000 MEM_PAIRS=3 PIN=0
#
# Each pair runs, back to back: the floor with INFLIGHT runs in flight, OLD `bench`, NEW
# `bench` (N runs, INFLIGHT in flight), then the same with NEW before OLD in the next
# pair. Then memory per parked run (MEM_PAIRS pairs, 0 skips it), PARKED runs held at the
# researcher, alternating, and the floor's own. Prints every raw round, the medians and each
# build's ratio to the floor.
# The floor is built from ../shared/bench-peers/limit into WORK (as side_by_side.sh does).
# PIN=1 runs each in-flight round on one CPU with one runtime thread (taskset,
# TOKIO_WORKER_THREADS=1, the floor's current-thread runtime): not the figure the budget
# names, but one a busy neighbour moves far less, since a round no longer needs two cores
# free at once.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/pairs.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: bench/pairs.sh OLD_BINARY NEW_BINARY}
PEERS=${PEERS:-$PWD/../shared/bench-peers}
WORK=${WORK:-/tmp/rolegate-bench}
PAIRS=${PAIRS:-6}
N=${N:-300000}
INFLIGHT=${INFLIGHT:-1000}
PARKED=${PARKED:-100000}
MEM_PAIRS=${MEM_PAIRS:-3}
PIN=${PIN:-0}
mkdir -p "$WORK"
RT=multi
pinned() { "$@"; }
if [ "$PIN" = 1 ]; then
  RT=current
  pinned() { TOKIO_WORKER_THREADS=1 taskset -c 1 "$@"; }
fi
LIMIT=$WORK/limit/target/release/limit
if [ ! -x "$LIMIT" ]; then
  rm -rf "$WORK/limit" && cp -r "$PEERS/limit" "$WORK/limit" && chmod -R u+w "$WORK/limit"
  (cd "$WORK/limit" && CARGO_TARGET_DIR="$WORK/limit/target" cargo build --release -q)
fi
RAW=$WORK/pairs.tsv
: > "$RAW"

floor() {  # runs/s of the floor, INFLIGHT in flight
  pinned "$LIMIT" conc --rt "$RT" --inflight "$INFLIGHT" -n "$N" | sed -n 's/^RESULT //p' |
    python3 -c 'import json,sys; print(round(json.loads(sys.stdin.readline())["runs_per_sec"]))'
}
# `bench` exits 1 when a target it knows is not met; the figures are printed all the same
ours() {  # runs/s of rolegate binary $1, INFLIGHT in flight
  pinned "$1" bench --sequential 1000 --concurrent "$N" --inflight "$INFLIGHT" --parked 0 --envelope-rounds 0 \
    --format json > "$WORK/pair.json" || true
  python3 -c 'import json,sys; print(round(json.load(sys.stdin)["inflight_runs_per_sec"]))' < "$WORK/pair.json"
}
parked() {  # bytes per parked run of rolegate binary $1
  "$1" bench --sequential 1000 --concurrent 1000 --parked "$PARKED" --envelope-rounds 0 --format json \
    > "$WORK/pair.json" || true
  python3 -c 'import json,sys; print(round(json.load(sys.stdin)["bytes_per_parked_run"]))' < "$WORK/pair.json"
}

echo "== $PAIRS pairs, $N runs each, $INFLIGHT in flight$([ "$PIN" = 1 ] && echo ', one CPU, one runtime thread') ($(date -u +%H:%M) UTC)"
for p in $(seq 1 "$PAIRS"); do
  f=$(floor)
  if [ $((p % 2)) -eq 1 ]; then o=$(ours "$OLD"); n=$(ours "$NEW"); else n=$(ours "$NEW"); o=$(ours "$OLD"); fi
  printf 'inflight\t%s\t%s\t%s\t%s\n' "$p" "$f" "$o" "$n" >> "$RAW"
  printf 'pair %s: floor %s  old %s  new %s runs/s  new/old %.3f\n' "$p" "$f" "$o" "$n" "$(python3 -c "print($n/$o)")"
done
[ "$MEM_PAIRS" -gt 0 ] && echo "== memory per parked run, $PARKED parked ($(date -u +%H:%M) UTC)"
for p in $(seq 1 "$MEM_PAIRS"); do
  if [ $((p % 2)) -eq 1 ]; then o=$(parked "$OLD"); n=$(parked "$NEW"); else n=$(parked "$NEW"); o=$(parked "$OLD"); fi
  printf 'parked\t%s\t-\t%s\t%s\n' "$p" "$o" "$n" >> "$RAW"
  printf 'pair %s: old %s B  new %s B\n' "$p" "$o" "$n"
done
if [ "$MEM_PAIRS" -gt 0 ]; then
  fm=$("$LIMIT" mem-midrun -k "$PARKED" | sed -n 's/^RESULT //p' |
    python3 -c 'import json,sys; print(round(json.loads(sys.stdin.readline())["bytes_per_run"]))')
  printf 'floor parked: %s B\n' "$fm"
fi
python3 - "$RAW" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
fl = [int(r[2]) for r in rows if r[0] == "inflight"]
old = [int(r[3]) for r in rows if r[0] == "inflight"]
new = [int(r[4]) for r in rows if r[0] == "inflight"]
ratios = [n / o for n, o in zip(new, old)]
po = [int(r[3]) for r in rows if r[0] == "parked"]
pn = [int(r[4]) for r in rows if r[0] == "parked"]
m = statistics.median
print(f"raw rounds, runs/s in flight: floor {fl}  old {old}  new {new}")
print(f"medians: floor {m(fl):.0f}  old {m(old):.0f} ({m(fl) / m(old):.2f}x the floor)  new {m(new):.0f} ({m(fl) / m(new):.2f}x the floor)")
print(f"new/old per pair: {[round(r, 3) for r in ratios]}  median {m(ratios):.3f}")
if po:
    print(f"parked, bytes per run: old {po}  new {pn}  medians old {m(po):.0f}  new {m(pn):.0f}")
PY
