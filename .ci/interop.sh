#!/usr/bin/env bash
# Interop: the release binary against two OpenAI-compatible mock servers this project did
# not write, both from PyPI at pinned versions, in a venv this script creates, on loopback:
#   - fakellm (rules matched on the request: the model's part of every design, native
#     and text), and a recording of a run replayed offline byte for byte;
#   - llmock (scripted through its control API: every design, then a 429 with
#     Retry-After, a hang, a reply cut at max_tokens and a withheld one);
#   - durable runs on both: a three-role run on fakellm and a single run on llmock, held
#     after a durable record and killed with SIGKILL, resume to the uninterrupted run's
#     end, and llmock is asked no request twice.
# Each case checks the exit code and the named outcome the binary printed; no case may
# panic. The in-repo loopback tests (tests/http_*.rs) cover the same failures with exact
# assertions; this script shows they hold against servers written by others.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${ROLEGATE_BIN:-target/release/rolegate}
PINS=(fakellm==0.3.5 llmock==0.2.2)
# shellcheck source=.ci/common.sh
source .ci/common.sh
ci_venv "${INTEROP_VENV:-target/interop-venv}" "${PINS[@]}"
# CI_INSTALL_ONLY=1: only make the venv (.ci/run does it in the background)
if [ "${CI_INSTALL_ONLY:-0}" = 1 ]; then
  exit 0
fi
if [ ! -x "$BIN" ]; then
  cargo build --release --quiet
fi
ci_scratch interop

wait_for() { # URL NAME LOG
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "$1"; then return 0; fi
    sleep 0.5
  done
  echo "interop: $2 did not start"; cat "$3"; exit 1
}

# ---- fakellm: the model's part of each design, as rules on the request ----
cat > "$WORK/fakellm.yaml" <<'YAML'
rules:
  - name: reviewer
    when: {messages_contain: "you are the reviewer of a three-role"}
    respond: {content: '{"kind": "verdict", "approve": true, "notes": "Re-read the cited document."}'}
  - name: planner
    when: {messages_contain: "you are the planner of a three-role"}
    respond: {content: '{"kind": "brief", "question": "Status of T-601 and our refund policy?"}'}
  - name: researcher-finish-native
    when: {previous_message_contains: "you are the researcher", messages_contain: "tool:lookup_document:o2", tools_include: finish}
    respond:
      tool_calls:
        - name: finish
          arguments: {answer: '{"kind":"finding","claim":"T-601 status is open; kc-returns-v3 is titled Returns and refunds (v3)","sources":["T-601","kc-returns-v3"]}', sources: [o1, o2]}
  - name: researcher-finish-text
    when: {previous_message_contains: "you are the researcher", messages_contain: "tool:lookup_document:o2"}
    respond: {content: '{"action": "finish", "answer": "{\"kind\":\"finding\",\"claim\":\"T-601 status is open; kc-returns-v3 is titled Returns and refunds (v3)\",\"sources\":[\"T-601\",\"kc-returns-v3\"]}", "sources": ["o1", "o2"]}'}
  - name: researcher-lookup-native
    when: {previous_message_contains: "you are the researcher", messages_contain: "tool:get_ticket:o1", tools_include: lookup_document}
    respond:
      tool_calls: [{name: lookup_document, arguments: {doc_id: kc-returns-v3}}]
  - name: researcher-lookup-text
    when: {previous_message_contains: "you are the researcher", messages_contain: "tool:get_ticket:o1"}
    respond: {content: "```json\n{\"action\": \"call\", \"tool\": \"lookup_document\", \"arguments\": {\"doc_id\": \"kc-returns-v3\"}}\n```"}
  - name: researcher-ticket-native
    when: {previous_message_contains: "you are the researcher", tools_include: get_ticket}
    respond:
      tool_calls: [{name: get_ticket, arguments: {ticket_id: T-601}}]
  - name: researcher-ticket-text
    when: {previous_message_contains: "you are the researcher"}
    respond: {content: '{"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}'}
  - name: plan
    when: {messages_contain: "you plan the tool calls"}
    respond: {content: '{"steps": [{"tool": "get_ticket", "arguments": {"ticket_id": "T-601"}, "reason": "read the ticket"}]}'}
  - name: policypal-finish
    when: {messages_contain: "you are policypal", tool_result_contains: "tool:get_ticket"}
    respond:
      tool_calls: [{name: finish, arguments: {answer: "T-601 is open.", sources: [o1]}}]
  - name: policypal-ticket
    when: {messages_contain: "you are policypal", tools_include: get_ticket}
    respond:
      tool_calls: [{name: get_ticket, arguments: {ticket_id: T-601}}]
  - name: single-finish-native
    when: {previous_message_contains: "working on one task", messages_contain: "tool:get_ticket:o1", tools_include: finish}
    respond:
      tool_calls: [{name: finish, arguments: {answer: "T-601 is open.", sources: [o1]}}]
  - name: single-finish-text
    when: {previous_message_contains: "working on one task", messages_contain: "tool:get_ticket:o1"}
    respond: {content: '{"action": "finish", "answer": "T-601 is open.", "sources": ["o1"]}'}
  - name: single-ticket-native
    when: {previous_message_contains: "working on one task", tools_include: get_ticket}
    respond:
      tool_calls: [{name: get_ticket, arguments: {ticket_id: T-601}}]
  - name: single-ticket-text
    when: {previous_message_contains: "working on one task"}
    respond: {content: '{"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}'}
YAML

FAKE_PORT=$(free_port)
"$VENV/bin/fakellm" serve --host 127.0.0.1 --port "$FAKE_PORT" --config "$WORK/fakellm.yaml" > "$WORK/fakellm.log" 2>&1 &
PIDS+=($!)
MOCK_PORT=$(free_port)
"$VENV/bin/llmock" serve --host 127.0.0.1 --port "$MOCK_PORT" --log-level warning > "$WORK/llmock.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$FAKE_PORT/docs" fakellm "$WORK/fakellm.log"
wait_for "http://127.0.0.1:$MOCK_PORT/_llmock/scenario" llmock "$WORK/llmock.log"
FAKE=http://127.0.0.1:$FAKE_PORT/v1
MOCK=http://127.0.0.1:$MOCK_PORT/v1

PASSED=0
FAILED=0
# case NAME EXIT TEXT -- ARGS...: runs the binary; its exit code must be EXIT, its
# standard output must hold TEXT, and nothing may panic.
case_() {
  local name=$1 want=$2 text=$3
  shift 4
  local code=0
  "$BIN" "$@" > "$WORK/out" 2> "$WORK/err" || code=$?
  if [ "$code" = "$want" ] && grep -qF -- "$text" "$WORK/out" && ! grep -q "panicked" "$WORK/err"; then
    PASSED=$((PASSED + 1))
    echo "ok   $name (exit $code: $text)"
  else
    FAILED=$((FAILED + 1))
    echo "FAIL $name: exit $code (wanted $want), wanted \"$text\" in the output"
    sed 's/^/     | /' "$WORK/out" "$WORK/err" | tail -n 20
  fi
}

scenario() { # JSON list of llmock behaviours, queued for the next requests ("[]": none)
  curl -s -o /dev/null -XDELETE "http://127.0.0.1:$MOCK_PORT/_llmock/scenario"
  [ "$1" = "[]" ] && return 0
  curl -sf -o /dev/null -XPOST "http://127.0.0.1:$MOCK_PORT/_llmock/scenario" \
    -H 'content-type: application/json' -d "{\"behaviors\": $1}"
}

GOAL="What is the status of T-601?"
MULTI_GOAL="Status of T-601 and our refund policy?"
COMMON=(--model openai:mock-model --zero-price --retries 0 --timeout-secs 20)

echo "-- fakellm ${PINS[0]#*==} at $FAKE"
for mode in native text; do
  case_ "single $mode" 0 "done done" -- run "$GOAL" "${COMMON[@]}" --base-url "$FAKE" --tool-mode "$mode"
  case_ "plan $mode" 0 "plan done" -- run --design plan "$GOAL" "${COMMON[@]}" --base-url "$FAKE" --tool-mode "$mode"
  case_ "three roles $mode" 0 "outcome: done" -- run --design multi "$MULTI_GOAL" "${COMMON[@]}" --base-url "$FAKE" --tool-mode "$mode"
done
case_ "policypal native" 0 "policypal done" -- run --design policypal "$GOAL" "${COMMON[@]}" --base-url "$FAKE" --tool-mode native
# PolicyPal calls tools natively only: in text mode it has no observation to rest an
# answer on, and the run hands over honestly
case_ "policypal text" 1 "policypal stuck" -- run --design policypal "$GOAL" "${COMMON[@]}" --base-url "$FAKE" --tool-mode text
# a recording of a three-role run, replayed with no server at all
case_ "three roles recorded" 0 "outcome: done" -- run --design multi "$MULTI_GOAL" "${COMMON[@]}" --base-url "$FAKE" --cache "$WORK/rec"
cp "$WORK/out" "$WORK/recorded"
case_ "three roles replayed offline" 0 "outcome: done" -- run --design multi "$MULTI_GOAL" "${COMMON[@]}" --replay "$WORK/rec"
if cmp -s "$WORK/out" "$WORK/recorded"; then
  PASSED=$((PASSED + 1)); echo "ok   the replay printed the recorded run byte for byte"
else
  FAILED=$((FAILED + 1)); echo "FAIL the replay differs from the recorded run"; diff "$WORK/recorded" "$WORK/out" | head -20
fi
case_ "replay miss" 1 "replay_miss" -- run "Another goal about T-601?" "${COMMON[@]}" --replay "$WORK/rec"

echo "-- llmock ${PINS[1]#*==} at $MOCK"
call() { printf '{"type": "reply", "tool_calls": [{"name": "%s", "arguments": %s}]}' "$1" "$2"; }
text() { "$VENV/bin/python" -c 'import json, sys; print(json.dumps({"type": "reply", "text": sys.argv[1]}))' "$1"; }
FINDING='{"kind":"finding","claim":"T-601 status is open; kc-returns-v3 is titled Returns and refunds (v3)","sources":["T-601","kc-returns-v3"]}'
BRIEF=$(text '{"kind": "brief", "question": "Status of T-601 and our refund policy?"}')
VERDICT=$(text '{"kind": "verdict", "approve": true, "notes": "Re-read the cited document."}')

scenario "[$(call get_ticket '{"ticket_id": "T-601"}'), $(call finish '{"answer": "T-601 is open.", "sources": ["o1"]}')]"
case_ "single native" 0 "done done" -- run "$GOAL" "${COMMON[@]}" --base-url "$MOCK"
scenario "[$(text '{"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}'), $(text '```json
{"action": "finish", "answer": "T-601 is open.", "sources": ["o1"]}
```')]"
case_ "single text" 0 "done done" -- run "$GOAL" "${COMMON[@]}" --base-url "$MOCK" --tool-mode text
scenario "[$(call finish "$("$VENV/bin/python" -c 'import json; print(json.dumps({"answer": json.dumps({"steps": [{"tool": "get_ticket", "arguments": {"ticket_id": "T-601"}, "reason": "read it"}]}), "sources": []}))')")]"
case_ "plan native (the plan as a finish call)" 0 "plan done" -- run --design plan "$GOAL" "${COMMON[@]}" --base-url "$MOCK"
scenario "[$(call get_ticket '{"ticket_id": "T-601"}'), $(call finish '{"answer": "T-601 is open.", "sources": ["o1"]}')]"
case_ "policypal native (finish as a call)" 0 "policypal done" -- run --design policypal "$GOAL" "${COMMON[@]}" --base-url "$MOCK"
FINISH_FINDING=$("$VENV/bin/python" -c 'import json, sys; print(json.dumps({"answer": sys.argv[1], "sources": ["o1", "o2"]}))' "$FINDING")
scenario "[$BRIEF, $(call get_ticket '{"ticket_id": "T-601"}'), $(call lookup_document '{"doc_id": "kc-returns-v3"}'), $(call finish "$FINISH_FINDING"), $VERDICT]"
case_ "three roles native" 0 "outcome: done" -- run --design multi "$MULTI_GOAL" "${COMMON[@]}" --base-url "$MOCK"
# the mock's own tool-calling model, unscripted: any ending, but a named one
scenario "[]"
case_ "single, llmock's own model" 1 "stopped" -- run "$GOAL" "${COMMON[@]}" --base-url "$MOCK"
# a 429 with Retry-After: 1, then the answers: the call is retried after the wait
scenario "[{\"type\": \"fail\", \"status\": 429, \"retry_after\": 1}, $(call get_ticket '{"ticket_id": "T-601"}'), $(call finish '{"answer": "T-601 is open.", "sources": ["o1"]}')]"
case_ "429 with Retry-After, retried" 0 "done done" -- run "$GOAL" --model openai:mock-model --zero-price --retries 1 --base-url "$MOCK"
if curl -s "http://127.0.0.1:$MOCK_PORT/_llmock/requests" | grep -q '"status": *429'; then
  PASSED=$((PASSED + 1)); echo "ok   the server answered 429 once and the client came back"
else
  FAILED=$((FAILED + 1)); echo "FAIL the server saw no 429"
fi
# durable runs on a real model (before the hang below, whose request llmock logs only when
# its 30 s delay ends): held after a durable record (the test hook), killed with
# SIGKILL, resumed; the stored exchanges answer what the killed process asked already
export ROLEGATE_SIGNING_KEY="interop signing key, not a real secret"
killed() { # STORE K ARGS...: runs the binary held after durable record K, then kill -9
  local store=$1 k=$2
  shift 2
  ROLEGATE_TEST_CRASH_AT="durable:hold_after_commit:$k" "$BIN" "$@" --store "$store" > /dev/null 2> "$WORK/held" &
  local pid=$!
  # up to a minute: on a busy machine the process may take seconds to reach its hold
  for _ in $(seq 1 600); do
    if grep -q "rolegate-test: held" "$WORK/held"; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  grep -q "rolegate-test: held" "$WORK/held" || { echo "     | never held after record $k:"; sed 's/^/     | /' "$WORK/held" | head -5; }
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
echo "-- durable runs, killed and resumed"
case_ "durable three roles (fakellm), uninterrupted" 0 "outcome: done" -- run --design multi "$MULTI_GOAL" "${COMMON[@]}" --base-url "$FAKE" --store "$WORK/durable-plain.db"
cp "$WORK/out" "$WORK/durable-plain"
killed "$WORK/durable-multi.db" 6 run --design multi "$MULTI_GOAL" "${COMMON[@]}" --base-url "$FAKE"
case_ "durable three roles (fakellm), interrupted" 0 "interrupted" -- runs list --store "$WORK/durable-multi.db"
case_ "durable three roles (fakellm), resumed" 0 "outcome: done" -- resume run-1 --store "$WORK/durable-multi.db"
if cmp -s "$WORK/out" "$WORK/durable-plain"; then
  PASSED=$((PASSED + 1)); echo "ok   the resumed run printed the uninterrupted run byte for byte"
else
  FAILED=$((FAILED + 1)); echo "FAIL the resumed run differs"; diff "$WORK/durable-plain" "$WORK/out" | head -20
fi
requests() { curl -s "http://127.0.0.1:$MOCK_PORT/_llmock/requests" | "$VENV/bin/python" -c 'import json, sys; d = json.load(sys.stdin); print(len(d if isinstance(d, list) else d.get("requests", [])))'; }
BEFORE=$(requests)
scenario "[$(call get_ticket '{"ticket_id": "T-601"}'), $(call finish '{"answer": "T-601 is open.", "sources": ["o1"]}')]"
# held once its first exchange (checkpoint 1, then the answer) is committed
killed "$WORK/durable-single.db" 2 run "$GOAL" "${COMMON[@]}" --base-url "$MOCK"
case_ "durable single (llmock), resumed" 0 "done done" -- resume run-1 --store "$WORK/durable-single.db"
AFTER=$(requests)
if [ $((AFTER - BEFORE)) = 2 ]; then
  PASSED=$((PASSED + 1)); echo "ok   killed and resumed, the server was asked 2 requests: none twice"
else
  FAILED=$((FAILED + 1)); echo "FAIL the server was asked $((AFTER - BEFORE)) requests (wanted 2)"
fi

# a hang: the attempt's timeout ends it
scenario '[{"type": "delay", "seconds": 30}]'
case_ "hang" 1 "timeout" -- run "$GOAL" --model openai:mock-model --zero-price --retries 0 --timeout-secs 1 --base-url "$MOCK"
# a reply cut at max_tokens, and one the server withheld
scenario '[{"type": "reply", "text": "{\"action\": \"finish\", \"answer\": \"T-6", "finish_reason": "length"}]'
case_ "truncated" 1 "truncated" -- run "$GOAL" "${COMMON[@]}" --base-url "$MOCK" --max-tokens 16
scenario '[{"type": "reply", "text": "", "finish_reason": "content_filter"}]'
case_ "content filter" 1 "refused_by_server" -- run "$GOAL" "${COMMON[@]}" --base-url "$MOCK"

echo "interop: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
