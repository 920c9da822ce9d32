#!/usr/bin/env bash
# OpenTelemetry: the release binary exports the spans of rows m01 and m06
# (data/multi_scenarios.jsonl) with --otlp to a real collector this project did not write,
# Arize Phoenix from PyPI at a pinned version, in a venv this script creates, on loopback.
# Phoenix receives OTLP/HTTP protobuf on /v1/traces and stores the spans; the check below
# reads them back through Phoenix's REST API and asserts:
#   - the span names (run multi; invoke_agent planner/researcher/reviewer; chat MODEL;
#     execute_tool TOOL; apply_guardrail ...) for both runs;
#   - the parent links: each role span under its run span, each chat, tool and guardrail
#     span under a role span of the same trace;
#   - the GenAI attributes (operation, agent name, model, token usage, finish reasons,
#     tool name and call id) and m06's refused send as an apply_guardrail span with
#     gen_ai.security.decision.type=deny, its code and its check;
#   - no e-mail address in clear anywhere in what Phoenix stored.
# The in-repo loopback test (tests/otel_export.rs) holds the same with exact assertions;
# this script shows a collector written by others reads them the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

BIN=${ROLEGATE_BIN:-target/release/rolegate}
PIN=arize-phoenix==20.26.1
# shellcheck source=.ci/common.sh
source .ci/common.sh
ci_venv "${OTEL_VENV:-target/otel-venv}" "$PIN"
installed=$(date +%s)
# CI_INSTALL_ONLY=1: only make the venv (.ci/run does it in the background while it
# builds and tests, then runs this script again for the check)
if [ "${CI_INSTALL_ONLY:-0}" = 1 ]; then
  echo "otel: $PIN installed in $((installed - started)) s"
  exit 0
fi
if [ ! -x "$BIN" ]; then
  cargo build --release --quiet
fi

ci_scratch otel

PORT=$(free_port)
GRPC_PORT=$(free_port)
# Phoenix on loopback only, its database in the scratch folder, no telemetry of its own
PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=$PORT PHOENIX_GRPC_PORT=$GRPC_PORT \
  PHOENIX_WORKING_DIR="$WORK/phoenix" PHOENIX_TELEMETRY_ENABLED=false \
  "$VENV/bin/phoenix" serve > "$WORK/phoenix.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 240); do
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"; then break; fi
  if ! kill -0 "${PIDS[0]}" 2>/dev/null; then echo "otel: Phoenix exited"; cat "$WORK/phoenix.log"; exit 1; fi
  sleep 0.5
done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" || { echo "otel: Phoenix did not start"; cat "$WORK/phoenix.log"; exit 1; }
ready=$(date +%s)

grep -E '"id": "m0[16]"' data/multi_scenarios.jsonl > "$WORK/rows.jsonl"
test "$(wc -l < "$WORK/rows.jsonl")" -eq 2
echo "-- rolegate --otlp http://127.0.0.1:$PORT suite rows(m01, m06)"
"$BIN" --otlp "http://127.0.0.1:$PORT" suite "$WORK/rows.jsonl" > "$WORK/suite.out" 2> "$WORK/suite.err"
cat "$WORK/suite.out"
if [ -s "$WORK/suite.err" ]; then echo "otel: the run warned:"; cat "$WORK/suite.err"; exit 1; fi

"$VENV/bin/python" - "http://127.0.0.1:$PORT" <<'PY'
import json, re, sys, time, urllib.request

base = sys.argv[1]

def get(path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)

def flat(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        key = prefix + k
        if isinstance(v, dict):
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out

def all_spans():
    spans, cursor = [], None
    while True:
        q = "/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = get(q)
        spans += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return spans

# Phoenix inserts what it received in the background: wait until both runs are whole
deadline = time.time() + 60
while True:
    spans = all_spans()
    roots = [s for s in spans if flat(s.get("attributes")).get("rolegate.run.reason")]
    if len(roots) >= 2 or time.time() > deadline:
        break
    time.sleep(0.5)
time.sleep(1)
spans = all_spans()
raw = json.dumps(spans)
by_id = {s["context"]["span_id"]: s for s in spans}
A = lambda s: flat(s.get("attributes"))

def fail(msg):
    print("otel: FAIL:", msg)
    sys.exit(1)

email = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
m = email.search(raw)
if m:
    fail(f"an e-mail address in clear in the stored spans: {m.group(0)}")

def role_of(s, trace):
    p = by_id.get(s.get("parent_id"))
    if p is None or A(p).get("gen_ai.operation.name") != "invoke_agent" or p["context"]["trace_id"] != trace:
        fail(f"{s['name']} is not under a role span of its run")
    return A(p)["gen_ai.agent.name"]

guards_of = {}
for run in ("run-m01", "run-m06"):
    roots = [s for s in spans if A(s).get("rolegate.run.id") == run and s["name"].startswith("run ")]
    if len(roots) != 1:
        fail(f"{run}: {len(roots)} run spans")
    root = roots[0]
    trace = root["context"]["trace_id"]
    if root.get("parent_id"):
        fail(f"{run}: the run span has a parent")
    if root["name"] != "run multi" or A(root).get("rolegate.run.reason") != "done":
        fail(f"{run}: {root['name']} ended {A(root).get('rolegate.run.reason')}")
    mine = [s for s in spans if s["context"]["trace_id"] == trace and s is not root]
    roles = [s for s in mine if A(s).get("gen_ai.operation.name") == "invoke_agent"]
    names = sorted({s["name"] for s in roles})
    if names != ["invoke_agent planner", "invoke_agent researcher", "invoke_agent reviewer"]:
        fail(f"{run}: role spans {names}")
    for r in roles:
        if r.get("parent_id") != root["context"]["span_id"]:
            fail(f"{run}: {r['name']} is not a child of the run span")
    chats = [s for s in mine if s["name"].startswith("chat ")]
    tools = [s for s in mine if s["name"].startswith("execute_tool ")]
    guards = [s for s in mine if s["name"].startswith("apply_guardrail ")]
    if not chats or not tools:
        fail(f"{run}: {len(chats)} chat and {len(tools)} execute_tool spans")
    chat_roles = {role_of(c, trace) for c in chats}
    if chat_roles != {"planner", "researcher", "reviewer"}:
        fail(f"{run}: chat spans under {chat_roles}")
    for c in chats:
        a = A(c)
        if a.get("gen_ai.operation.name") != "chat" or c["name"] != "chat " + str(a.get("gen_ai.request.model")):
            fail(f"{run}: chat span {c['name']} {a}")
        if not (int(a.get("gen_ai.usage.input_tokens", 0)) > 0 and int(a.get("gen_ai.usage.output_tokens", 0)) > 0):
            fail(f"{run}: {c['name']} has no token usage: {a}")
        if a.get("gen_ai.response.finish_reasons") not in (["stop"], ["tool_calls"]):
            fail(f"{run}: {c['name']} finish reasons {a.get('gen_ai.response.finish_reasons')!r}")
    for t in tools:
        a = A(t)
        role_of(t, trace)
        if a.get("gen_ai.operation.name") != "execute_tool" or t["name"] != "execute_tool " + str(a.get("gen_ai.tool.name")):
            fail(f"{run}: tool span {t['name']} {a}")
        if not str(a.get("gen_ai.tool.call.id", "")).startswith(run):
            fail(f"{run}: {t['name']} has no call id")
    guards_of[run] = [(role_of(g, trace), A(g)) for g in guards]
    print(f"otel: {run}: {1 + len(mine)} spans: 1 run, {len(roles)} invoke_agent, {len(chats)} chat, "
          f"{len(tools)} execute_tool, {len(guards)} apply_guardrail")

if guards_of["run-m01"]:
    fail(f"run-m01 refused nothing, yet: {guards_of['run-m01']}")
g = [(role, a.get("gen_ai.tool.name"), a.get("rolegate.code"), a.get("gen_ai.guardian.name"), a.get("gen_ai.security.decision.type"))
     for role, a in guards_of["run-m06"]]
if g != [("reviewer", "send_email_draft", "not_allowed", "scope_check", "deny")]:
    fail(f"run-m06 guardrails: {g}")
print(f"otel: run-m06: apply_guardrail under invoke_agent reviewer: send_email_draft not_allowed (scope_check), decision deny")
print(f"otel: {len(spans)} spans stored by Phoenix, no e-mail address in clear")
PY
finished=$(date +%s)
echo "otel: passed (install $((installed - started)) s, Phoenix start $((ready - installed)) s, run and checks $((finished - ready)) s)"
