#!/usr/bin/env bash
# Measures rolegate's three-role pipeline next to its peers in one session, so the
# ratios compare figures taken on the same machine under the same load:
#   - the bare tokio floor, built from ../shared/bench-peers/limit into a temp dir;
#   - AutoGen core and LangGraph, in a venv set up from the pinned requirements
#     (peers/requirements-lock.txt pins langgraph 1.2.24, langgraph-checkpoint-sqlite 3.1.2
#     and aiosqlite 0.22.1 for the durable column);
#   - `rolegate bench`, given the peers' figures;
#   - durable runs: LangGraph `invoke` with its SqliteSaver and durability=sync (a
#     checkpoint committed before the next node runs) beside `rolegate bench --durable`
#     (every hand-off and researcher step committed before the run goes on), both files in
#     $WORK on the same disk, both with SQLite's synchronous commits.
# Nothing of the peers is copied into this repository.
#
#   bench/side_by_side.sh            # PEERS=../shared/bench-peers WORK=/tmp/rolegate-bench
#   ROUNDS=3 bench/side_by_side.sh   # rounds of the throughput figures (medians printed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEERS=${PEERS:-$ROOT/../shared/bench-peers}
WORK=${WORK:-/tmp/rolegate-bench}
ROUNDS=${ROUNDS:-3}
INFLIGHT=${INFLIGHT:-1000}
PEER_N=${PEER_N:-2000}
DURABLE_N=${DURABLE_N:-300}
mkdir -p "$WORK"
RAW=$WORK/raw.jsonl
: > "$RAW"

echo "== setup (cached in $WORK)"
if [ ! -x "$WORK/limit/target/release/limit" ]; then
  rm -rf "$WORK/limit" && cp -r "$PEERS/limit" "$WORK/limit" && chmod -R u+w "$WORK/limit"
  (cd "$WORK/limit" && CARGO_TARGET_DIR="$WORK/limit/target" cargo build --release -q)
fi
if [ ! -x "$WORK/venv/bin/python" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q -r "$PEERS/peers/requirements-lock.txt"
fi
cargo build --release -q
PY=$WORK/venv/bin/python
LIMIT=$WORK/limit/target/release/limit
RG=${CARGO_TARGET_DIR:-$ROOT/target}/release/rolegate

keep() {  # keep the peers' RESULT lines
  "$@" | sed -n 's/^RESULT //p' >> "$RAW"
}

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS"
  keep "$PY" "$PEERS/peers/autogen_pipeline.py" --mode conc --concurrency "$INFLIGHT" -n "$PEER_N"
  keep "$PY" "$PEERS/peers/autogen_pipeline.py" --mode seq -n "$PEER_N"
  keep "$PY" "$PEERS/peers/langgraph_pipeline.py" --mode ainvoke --concurrency "$INFLIGHT" -n "$PEER_N"
  keep "$PY" "$PEERS/peers/langgraph_pipeline.py" --mode invoke -n "$PEER_N"
  keep "$LIMIT" conc --rt multi --inflight "$INFLIGHT" -n 300000
  keep "$LIMIT" seq --rt multi -n 100000
  "$RG" bench --parked 0 --format json > "$WORK/rolegate-$r.json" || true
  rm -f "$WORK"/lg-durable.sqlite* "$WORK"/rg-durable.db*
  keep "$PY" "$PEERS/peers/langgraph_pipeline.py" --mode invoke --checkpointer --sqlite "$WORK/lg-durable.sqlite" \
    --durability sync -n "$DURABLE_N"
  "$RG" bench --durable --durable-store "$WORK/rg-durable.db" --inflight "$INFLIGHT" --format json \
    > "$WORK/rolegate-durable-$r.json" || true
done
echo "== memory"
keep "$LIMIT" mem-midrun -k 100000
"$RG" bench --sequential 1000 --concurrent 10000 --parked 100000 --format json > "$WORK/rolegate-mem.json" || true

echo "== figures"
python3 - "$RAW" "$WORK" "$ROUNDS" > "$WORK/args.txt" <<'PY'
import json, statistics, sys
raw, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(raw) if l.strip()]
def med(pred):
    v = [r["runs_per_sec"] for r in rows if pred(r)]
    return statistics.median(v) if v else None
ag_conc = med(lambda r: r["bench"] == "autogen" and r["variant"].startswith("conc"))
ag_seq = med(lambda r: r["bench"] == "autogen" and r["variant"].startswith("seq"))
lg_conc = med(lambda r: r["bench"] == "langgraph" and "ainvoke" in r["variant"])
lg_seq = med(lambda r: r["bench"] == "langgraph" and "ainvoke" not in r["variant"] and "invoke" in r["variant"]
             and "SqliteSaver" not in r["variant"])
lg_durable = med(lambda r: r["bench"] == "langgraph" and "SqliteSaver" in r["variant"])
durable = [json.load(open(f"{work}/rolegate-durable-{i}.json")) for i in range(1, rounds + 1)]
floor_conc = med(lambda r: r["bench"] == "rust" and r["variant"].startswith("conc"))
floor_seq = med(lambda r: r["bench"] == "rust" and r["variant"].startswith("seq"))
mem = [r["bytes_per_run"] for r in rows if r["bench"] == "rust" and "mem" in r["variant"]]
ours = [json.load(open(f"{work}/rolegate-{i}.json")) for i in range(1, rounds + 1)]
ours_conc = statistics.median(o["inflight_runs_per_sec"] for o in ours)
ours_seq = statistics.median(o["sequential_runs_per_sec"] for o in ours)
ours_env = statistics.median(o["coordinator_us_per_envelope"] for o in ours)
m = json.load(open(f"{work}/rolegate-mem.json"))
py_best = max(x for x in [ag_conc, ag_seq, lg_conc, lg_seq] if x)
print(f"medians of {rounds} rounds, measured side by side", file=sys.stderr)
print(f"  AutoGen core   in flight {ag_conc:10.0f} runs/s   sequential {ag_seq:10.0f} runs/s", file=sys.stderr)
print(f"  LangGraph      in flight {lg_conc:10.0f} runs/s   sequential {lg_seq:10.0f} runs/s", file=sys.stderr)
print(f"  tokio floor    in flight {floor_conc:10.0f} runs/s   sequential {floor_seq:10.0f} runs/s   parked {mem[0]:.0f} B/run", file=sys.stderr)
print(f"  rolegate       in flight {ours_conc:10.0f} runs/s   sequential {ours_seq:10.0f} runs/s   parked {m['bytes_per_parked_run']:.0f} B/run", file=sys.stderr)
print(f"  rolegate coordinator intake: {ours_env:.2f} us/envelope", file=sys.stderr)
print(f"  rolegate in flight / fastest Python figure ({py_best:.0f}): {ours_conc / py_best:.1f}x (target >= 30x)", file=sys.stderr)
print(f"  tokio floor / rolegate in flight: {floor_conc / ours_conc:.2f}x slower (target <= 1.5x)", file=sys.stderr)
print(f"  rolegate parked run: {m['bytes_per_parked_run'] / 1000:.1f} KB (target <= 17 KB)", file=sys.stderr)
def raw_of(pred):
    return [round(r["runs_per_sec"]) for r in rows if pred(r)]
print("  raw rounds, runs/s:", file=sys.stderr)
print(f"    tokio floor in flight:        {raw_of(lambda r: r['bench'] == 'rust' and r['variant'].startswith('conc'))}", file=sys.stderr)
print(f"    rolegate in flight:           {[round(o['inflight_runs_per_sec']) for o in ours]}", file=sys.stderr)
print(f"    LangGraph invoke:             {raw_of(lambda r: r['bench'] == 'langgraph' and 'ainvoke' not in r['variant'] and 'SqliteSaver' not in r['variant'])}", file=sys.stderr)
print(f"    AutoGen in flight:            {raw_of(lambda r: r['bench'] == 'autogen' and r['variant'].startswith('conc'))}", file=sys.stderr)
print("  raw rounds, durable runs/s:", file=sys.stderr)
print(f"    LangGraph + SqliteSaver sync: {[round(r['runs_per_sec']) for r in rows if r['bench'] == 'langgraph' and 'SqliteSaver' in r['variant']]}", file=sys.stderr)
print(f"    rolegate durable in flight:   {[round(d['durable_inflight_runs_per_sec']) for d in durable]}", file=sys.stderr)
print(f"    rolegate durable one at a time: {[round(d['durable_sequential_runs_per_sec']) for d in durable]}", file=sys.stderr)
print(f"    rolegate steps per commit:    {[round(d['durable_steps_per_commit'], 1) for d in durable]}", file=sys.stderr)
dur_conc = statistics.median(d["durable_inflight_runs_per_sec"] for d in durable)
dur_seq = statistics.median(d["durable_sequential_runs_per_sec"] for d in durable)
print(f"  durable (synchronous SQLite commits): LangGraph + SqliteSaver {lg_durable:.0f} runs/s; "
      f"rolegate {dur_conc:.0f} runs/s in flight, {dur_seq:.0f} one at a time", file=sys.stderr)
print(f"  rolegate durable in flight / LangGraph + SqliteSaver: {dur_conc / lg_durable:.1f}x (target >= 20x); "
      f"one at a time: {dur_seq / lg_durable:.1f}x", file=sys.stderr)
open(f"{work}/lg-durable.txt", "w").write(f"{lg_durable:.0f}")
print(f"--python-peer AutoGen-in-flight={ag_conc:.0f} --python-peer AutoGen-sequential={ag_seq:.0f} "
      f"--python-peer LangGraph-in-flight={lg_conc:.0f} --python-peer LangGraph-sequential={lg_seq:.0f} "
      f"--floor {floor_conc:.0f} --floor-bytes {mem[0]:.0f}")
PY
echo "== rolegate bench --durable, printed against this session's LangGraph + SqliteSaver"
rm -f "$WORK"/rg-durable.db*
"$RG" bench --durable --durable-store "$WORK/rg-durable.db" --inflight "$INFLIGHT" \
  --langgraph-durable "$(cat "$WORK/lg-durable.txt")" || true
echo "== one more rolegate bench, printed against this session's peers"
# shellcheck disable=SC2046
"$RG" bench --parked 20000 $(cat "$WORK/args.txt") || true
