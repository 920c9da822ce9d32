#!/usr/bin/env bash
# Where two builds spend CPU time, side by side: `perf` samples the CPU clock of each
# binary's `bench` run and the script prints the time per run, then the time per run of each
# kind of work (regex scans, JSON, allocation, copying, the runtime, ...) and of the
# functions that differ most. Instruction counts (bench/instructions.sh) cannot show a build
# that runs the same instructions slower because it misses the caches more; this can.
#
#   bench/wallclock.sh OLD_BINARY NEW_BINARY   # N=100000 INFLIGHT=1000 FREQ=4999 ROUNDS=2 PIN=0
#
# Each round samples OLD then NEW (NEW then OLD in the next): the bench's own warm-up (2,000
# runs one at a time, then twice max(INFLIGHT, 1,000) in flight), then N runs with INFLIGHT
# in flight; time per run is the whole sample over all those runs, the rounds added up.
# PIN=1 runs both on one CPU with one runtime thread, as `PIN=1 bench/pairs.sh` does. Needs
# `perf` (software CPU-clock events are enough, so it works in a VM without hardware
# counters) and python3.
set -euo pipefail
OLD=${1:?usage: bench/wallclock.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: bench/wallclock.sh OLD_BINARY NEW_BINARY}
command -v perf > /dev/null || { echo "bench/wallclock.sh: perf is not installed" >&2; exit 2; }
N=${N:-100000}
INFLIGHT=${INFLIGHT:-1000}
FREQ=${FREQ:-4999}
ROUNDS=${ROUNDS:-2}
PIN=${PIN:-0}
WORK=${WORK:-/tmp/rolegate-bench}
mkdir -p "$WORK"
pinned() { "$@"; }
if [ "$PIN" = 1 ]; then
  pinned() { TOKIO_WORKER_THREADS=1 taskset -c 1 "$@"; }
fi

sample() {  # samples by function of binary $1 into $2, "count<TAB>symbol"
  # `bench` exits 1 when a target it knows is not met; its samples count all the same
  pinned perf record -q -e cpu-clock -F "$FREQ" -o "$WORK/wallclock.data" \
    "$1" bench --sequential 0 --concurrent "$N" --inflight "$INFLIGHT" --parked 0 --envelope-rounds 0 \
    > /dev/null 2> "$WORK/wallclock.err" || true
  perf report -i "$WORK/wallclock.data" --no-children --sort symbol --stdio -n 2> /dev/null |
    awk '/^ +[0-9.]+%/ { n = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); sub(/ +- +- *$/, ""); print n "\t" $0 }' > "$2"
  [ -s "$2" ] || { echo "bench/wallclock.sh: perf took no samples of $1 (see $WORK/wallclock.err)" >&2; exit 1; }
}

for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then
    sample "$OLD" "$WORK/wallclock.old.$r"; sample "$NEW" "$WORK/wallclock.new.$r"
  else
    sample "$NEW" "$WORK/wallclock.new.$r"; sample "$OLD" "$WORK/wallclock.old.$r"
  fi
done

python3 - "$WORK/wallclock" "$N" "$INFLIGHT" "$FREQ" "$ROUNDS" "$OLD" "$NEW" <<'EOF'
import re, sys
prefix, n, inflight, freq, rounds, old_bin, new_bin = sys.argv[1:]
# microseconds of CPU a sample stands for, per run (the bench's warm-up runs included)
runs = float(n) + 2000 + 2 * max(float(inflight), 1000)
per_round = 1e6 / float(freq) / runs
per_run = per_round / float(rounds)

def load(path):
    """Samples by function of one round (user and kernel functions alike)."""
    out = {}
    for line in open(path):
        count, name = line.rstrip("\n").split("\t", 1)
        name = re.sub(r"^\[[.k]\] ", "", name.strip())
        out[name] = out.get(name, 0) + int(count)
    return out

def added(tables):
    out = {}
    for table in tables:
        for name, count in table.items():
            out[name] = out.get(name, 0) + count
    return out

# the first kind whose pattern a function's name matches ("other" when none does)
KINDS = [
    ("regex scans", r"regex|CachedSet"),
    ("JSON (serde and readers)", r"serde|json|JsonReader|push_str_literal|parse_message|format_escaped|itoa|ryu"),
    ("allocation", r"^_?mi_|malloc|free\b|realloc|RawVec|finish_grow|alloc_copy|HeapBuffer"),
    ("copy and compare", r"memmove|memcpy|memcmp|memset|memchr|bcmp"),
    ("runtime and channels", r"tokio|mpsc|notify|Notif|cancellation|oneshot|[Ww]aker"),
    ("dropping", r"drop_in_place|dying_next"),
    ("prompt blocks", r"model::blocks"),
    ("coordinator", r"multi::coordinator|multi::envelope"),
    ("roles and fakes", r"multi::roles|multi::behaviours"),
    ("world and labels", r"world::|label|ifc"),
    ("loop, gate and tools", r"agent::|gate::|tools::"),
    ("security", r"security::"),
    ("cost", r"cost::"),
    ("formatting", r"fmt::|format"),
]

def kind(name):
    for k, pattern in KINDS:
        if re.search(pattern, name):
            return k
    return "other"

old_rounds = [load(f"{prefix}.old.{r}") for r in range(1, int(rounds) + 1)]
new_rounds = [load(f"{prefix}.new.{r}") for r in range(1, int(rounds) + 1)]
old, new = added(old_rounds), added(new_rounds)
each = lambda tables: ", ".join(f"{sum(t.values()) * per_round:.2f}" for t in tables)
t_old, t_new = sum(old.values()) * per_run, sum(new.values()) * per_run
print(f"CPU time per run ({int(rounds)} rounds of {int(n):,} runs, {int(float(freq)):,} samples/s), us:")
print(f"  old {t_old:6.2f}  rounds {each(old_rounds)}  {old_bin}")
print(f"  new {t_new:6.2f}  rounds {each(new_rounds)}  {new_bin}")
print(f"  old/new {t_old / t_new:.3f}")
by_kind = {}
for table, side in ((old, 0), (new, 1)):
    for name, count in table.items():
        by_kind.setdefault(kind(name), [0, 0])[side] += count
print("\nby kind, us per run (old, new, difference):")
for k, (o, w) in sorted(by_kind.items(), key=lambda kv: kv[1][0] - kv[1][1]):
    print(f"  {o * per_run:6.2f} {w * per_run:6.2f} {(w - o) * per_run:+6.2f}  {k}")
names = sorted(set(old) | set(new), key=lambda f: old.get(f, 0) - new.get(f, 0))
print("\nfunctions that differ most, us per run (old, new, difference):")
for f in names[:15] + ["..."] + names[-5:]:
    if f == "...":
        print("  ...")
        continue
    o, w = old.get(f, 0) * per_run, new.get(f, 0) * per_run
    print(f"  {o:6.2f} {w:6.2f} {w - o:+6.2f}  {f[:100]}")
EOF
