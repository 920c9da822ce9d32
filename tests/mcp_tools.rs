//! An MCP server from PyPI behind a gate: `tests/mcp/notes_server.py`, written with
//! FastMCP from the `mcp` package and started on stdio by each test.
//!
//! These tests need a Python with `mcp` installed, so `cargo test` skips them
//! (`#[ignore]`); `.ci/run` installs the pinned venv (`bridge/agentdojo/install.sh`) and runs
//! them with `cargo test mcp_tools -- --ignored`. The interpreter is `ROLEGATE_MCP_PYTHON`,
//! else the venv's (`ROLEGATE_AGENTDOJO_VENV`, else `~/.cache/rolegate/agentdojo-venv`); a
//! missing one fails the test with that message.

use rolegate::ToolGate;
use rolegate::cost::ManualClock;
use rolegate::gate::{CallContext, GateCode, GateOutcome, Policy};
use rolegate::human::{ApprovalQueue, DecisionCode};
use rolegate::label::{Confidentiality, Integrity};
use rolegate::tools::ToolCall;
use rolegate::tools::mcp::{McpError, McpServer, McpServers, ServerSpec};
use rolegate::world::{World, WorldData};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn python() -> String {
    if let Ok(p) = std::env::var("ROLEGATE_MCP_PYTHON") {
        return p;
    }
    let p = rolegate::suite::agentdojo::venv_python();
    assert!(p.exists(), "no Python with `mcp` at {}: run bridge/agentdojo/install.sh", p.display());
    p.display().to_string()
}

fn notes(variant: &str) -> ServerSpec {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/notes_server.py");
    ServerSpec {
        command: python(),
        args: vec![script.display().to_string()],
        env: BTreeMap::from([("NOTES_VARIANT".to_string(), variant.to_string())]),
        start_timeout_ms: 30_000,
        ..ServerSpec::default()
    }
}

/// The notes server of `variant` started over streamable HTTP on a free loopback port, and
/// the spec that reaches it. Ready once its web server says it runs; the child is killed
/// when the returned handle drops.
async fn notes_over_http(variant: &str) -> (tokio::process::Child, ServerSpec) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/notes_server.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .env("NOTES_VARIANT", variant)
        .env("NOTES_HTTP_PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let up = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Uvicorn running on") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(up, Ok(true), "the notes server did not come up on port {port}");
    // the server's log is drained, so a full pipe never stalls it
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let url = format!("http://127.0.0.1:{port}/mcp");
    (child, ServerSpec { url: Some(url), start_timeout_ms: 30_000, ..ServerSpec::default() })
}

fn servers(variant: &str) -> McpServers {
    McpServers { servers: BTreeMap::from([("notes".to_string(), notes(variant))]) }
}

/// The digests of the plain server's tools, as a person reviewing `rolegate mcp list` pins them.
async fn reviewed_pins() -> BTreeMap<String, String> {
    let listed = McpServer::inspect("notes", &notes("plain")).await.unwrap();
    assert!(listed.iter().all(|t| t.problems.is_empty()), "{listed:?}");
    listed.into_iter().map(|t| (t.name, t.digest)).collect()
}

/// A `notes` task that may read notes and write (add) them; `add_note` granted.
fn policy(pins: &BTreeMap<String, String>, named: &[&str]) -> Policy {
    let mut p = Policy::bundled().unwrap();
    p.tasks.insert("notes".into(), named.iter().map(|t| (*t).to_string()).collect());
    p.access.insert("notes__read_note".into(), rolegate::gate::Access::Read);
    p.access.insert("notes__stats".into(), rolegate::gate::Access::Read);
    p.access.insert("notes__add_note".into(), rolegate::gate::Access::Write);
    p.grants.insert("notes__add_note".into());
    p.pins = named.iter().filter_map(|t| pins.get(*t).map(|d| ((*t).to_string(), d.clone()))).collect();
    p
}

fn gate(policy: Policy) -> ToolGate {
    ToolGate::new(policy, World::new(Arc::new(WorldData::bundled().unwrap())))
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall::new("c1", name, arguments)
}

/// The server's `stats` answer: a JSON object in the result's text.
fn stats_of(value: &Value) -> Value {
    serde_json::from_str(value["text"].as_str().unwrap_or_default()).unwrap_or_default()
}

const CX: fn() -> CallContext<'static> = || CallContext::new("notes", "r1", "kwame");

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_an_allowed_read_runs_untrusted_and_audited_and_a_bad_argument_is_refused() {
    let pins = reviewed_pins().await;
    let mut g = gate(policy(&pins, &["notes__read_note"]));
    g.connect_mcp(&servers("plain")).await.unwrap();
    let spec = g.spec("notes__read_note").unwrap();
    assert_eq!(spec.description, "Return the text of one note, by its id.");
    let out = g.run_async(&call("notes__read_note", json!({"note_id": "n1"})), CX()).await;
    let GateOutcome::Ok(data) = &out else { panic!("{out:?}") };
    assert_eq!(data.value()["text"], "Standup moved to 10:00.");
    // the result is untrusted, and as confidential as the policy's default for MCP tools
    assert_eq!(g.taint().label().integrity, Integrity::Untrusted);
    assert_eq!(g.taint().label().confidentiality, Confidentiality::User);
    assert_eq!(g.taint().source(), Some("notes__read_note"));
    // arguments are checked against the declared schema before anything is sent
    for bad in [json!({}), json!({"note_id": 1}), json!({"note_id": "n1", "cc": "x"})] {
        let refused = g.run_async(&call("notes__read_note", bad.clone()), CX()).await;
        assert_eq!(refused.code(), GateCode::InvalidArguments, "{bad}");
    }
    // a failure the server reports is a named failure, not data
    let missing = g.run_async(&call("notes__read_note", json!({"note_id": "n9"})), CX()).await;
    assert_eq!(missing.code(), GateCode::ToolError, "{missing:?}");
    let audit: Vec<&str> = g.audit().iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(audit, ["ok", "invalid_arguments", "invalid_arguments", "invalid_arguments", "tool_error"]);
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_write_parks_for_approval_and_runs_once_when_a_person_approves() {
    let pins = reviewed_pins().await;
    let mut g = gate(policy(&pins, &["notes__add_note", "notes__stats"]));
    g.connect_mcp(&servers("plain")).await.unwrap();
    let stats = |v: &GateOutcome| match v {
        GateOutcome::Ok(d) => stats_of(d.value())["notes"].as_u64(),
        _ => None,
    };
    let parked = g.run_async(&call("notes__add_note", json!({"text": "Buy milk."})), CX()).await;
    let GateOutcome::NeedsApproval { pending_id } = &parked else { panic!("{parked:?}") };
    let before = g.run_async(&call("notes__stats", json!({})), CX()).await;
    assert_eq!(stats(&before), Some(2), "parking sent nothing to the server");

    let clock = ManualClock::new();
    let mut queue = ApprovalQueue::new(["lena"], clock.shared());
    let request = queue.submit(&g.pending()[pending_id].clone()).unwrap();
    let decision = queue.approve_async(&request.id, "lena", &mut g).await;
    let ran = decision.outcome.unwrap();
    let GateOutcome::Ok(data) = &ran else { panic!("{ran:?}") };
    assert_eq!(data.value()["text"], "n3");
    // run once: a second approval is refused, and the approved token replays the stored
    // result without sending anything
    let again = queue.approve_async(&request.id, "lena", &mut g).await;
    assert!(again.outcome.is_none() && again.code != DecisionCode::Ok, "{again:?}");
    let token = queue.token_for(&request.id).unwrap();
    let replay = g.execute_approved_async(&token).await.unwrap();
    let GateOutcome::Ok(data) = &replay else { panic!("{replay:?}") };
    assert_eq!((data.value()["text"].as_str(), data.value()["replayed"].as_bool()), (Some("n3"), Some(true)));
    let after = g.run_async(&call("notes__stats", json!({})), CX()).await;
    assert_eq!(stats(&after), Some(3), "exactly one note was added");
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_tool_outside_the_tasks_scope_is_refused_and_never_shown() {
    let pins = reviewed_pins().await;
    let mut g = gate(policy(&pins, &["notes__read_note"]));
    g.connect_mcp(&servers("plain")).await.unwrap();
    // the server lists delete_all; the policy does not name it: not added, not shown
    assert!(g.spec("notes__delete_all").is_none());
    let refused = g.run_async(&call("notes__delete_all", json!({})), CX()).await;
    assert_eq!(refused.code(), GateCode::NotAllowed);
    // a tool the policy names, in a task that does not list it
    let other = g
        .run_async(&call("notes__read_note", json!({"note_id": "n1"})), CallContext::new("triage", "r1", "kwame"))
        .await;
    assert_eq!(other.code(), GateCode::NotAllowed);
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_poisoned_description_is_refused_by_name_before_any_model_sees_it() {
    let listed = McpServer::inspect("notes", &notes("poisoned")).await.unwrap();
    let add = listed.iter().find(|t| t.name == "notes__add").unwrap();
    for signal in ["ignore_rules", "secrecy", "email"] {
        assert!(add.problems.iter().any(|p| p == signal), "{signal} in {:?}", add.problems);
    }
    let pins: BTreeMap<String, String> = listed.iter().map(|t| (t.name.clone(), t.digest.clone())).collect();
    // pinned or not, a poisoned tool is refused: a pin does not make its text safe
    let mut g = gate(policy(&pins, &["notes__read_note", "notes__add"]));
    let err = g.connect_mcp(&servers("poisoned")).await.unwrap_err();
    assert_eq!(err.code(), "mcp_description_poisoned", "{err}");
    assert!(matches!(&err, McpError::PoisonedDescription { tool, .. } if tool == "notes__add"));
    assert!(g.spec("notes__add").is_none() && g.spec("notes__read_note").is_none());
    // a policy that does not name the poisoned tool uses the server's other tools
    let mut g = gate(policy(&pins, &["notes__read_note"]));
    g.connect_mcp(&servers("poisoned")).await.unwrap();
    assert!(g.spec("notes__add").is_none());
    assert_eq!(g.run_async(&call("notes__read_note", json!({"note_id": "n2"})), CX()).await.code(), GateCode::Ok);
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_changed_or_unpinned_tool_refuses_the_server_by_name() {
    let pins = reviewed_pins().await;
    // the server now describes read_note differently from the definition pinned
    let err = gate(policy(&pins, &["notes__read_note"])).connect_mcp(&servers("rug")).await.unwrap_err();
    assert_eq!(err.code(), "mcp_tool_changed", "{err}");
    // named without a pin: refused, with the digest to review
    let mut unpinned = policy(&pins, &["notes__read_note"]);
    unpinned.pins.clear();
    let err = gate(unpinned).connect_mcp(&servers("plain")).await.unwrap_err();
    assert_eq!(err.code(), "mcp_tool_unpinned");
    assert!(err.to_string().contains(&pins["notes__read_note"]), "{err}");
    // named, and no longer listed
    let mut gone = policy(&pins, &["notes__read_note", "notes__archive"]);
    gone.pins.insert("notes__archive".into(), pins["notes__read_note"].clone());
    let err = gate(gone).connect_mcp(&servers("plain")).await.unwrap_err();
    assert_eq!(err.code(), "mcp_tool_missing");
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_tool_changed_mid_run_fails_every_later_call_and_sends_nothing() {
    let pins = reviewed_pins().await;
    let mut g = gate(policy(&pins, &["notes__read_note", "notes__stats"]));
    g.connect_mcp(&servers("rug_later")).await.unwrap();
    // the first call answers, and the server changes read_note and announces it
    let first = g.run_async(&call("notes__read_note", json!({"note_id": "n1"})), CX()).await;
    assert_eq!(first.code(), GateCode::Ok);
    let mut later = Vec::new();
    for _ in 0..3 {
        later.push(g.run_async(&call("notes__stats", json!({})), CX()).await.code());
    }
    // the announcement may land just after the next call was sent; from then on: refused
    assert_eq!(later.last(), Some(&GateCode::ToolChanged), "{later:?}");
    assert!(later.iter().skip_while(|c| **c == GateCode::Ok).all(|c| *c == GateCode::ToolChanged), "{later:?}");
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_call_past_the_gates_timeout_is_cancelled_at_the_server() {
    let mut listed_pins = reviewed_pins().await;
    let slow = McpServer::inspect("notes", &notes("slow")).await.unwrap();
    listed_pins.extend(slow.into_iter().map(|t| (t.name, t.digest)));
    let mut p = policy(&listed_pins, &["notes__wait_forever", "notes__stats"]);
    p.access.insert("notes__wait_forever".into(), rolegate::gate::Access::Read);
    p.call_limits.insert("notes__stats".into(), 60);
    let mut g = gate(p).with_call_timeout(Duration::from_millis(300));
    g.connect_mcp(&servers("slow")).await.unwrap();
    let out = g.run_async(&call("notes__wait_forever", json!({})), CX()).await;
    assert_eq!(out.code(), GateCode::ToolTimeout);
    // the dropped call told the server to cancel it; the server counts the cancellation
    let mut cancelled = 0;
    for _ in 0..50 {
        tokio::task::yield_now().await;
        let stats = g.run_async(&call("notes__stats", json!({})), CX()).await;
        let GateOutcome::Ok(d) = &stats else { panic!("{stats:?}") };
        cancelled = stats_of(d.value())["cancelled"].as_u64().unwrap_or(0);
        if cancelled > 0 {
            break;
        }
    }
    assert_eq!(cancelled, 1);
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_server_over_streamable_http_is_pinned_scoped_and_parked_as_one_on_stdio() {
    let pins = reviewed_pins().await;
    let (_server, spec) = notes_over_http("plain").await;
    // the same definitions give the same digests, whatever carries them
    let listed = McpServer::inspect("notes", &spec).await.unwrap();
    let over_http: BTreeMap<String, String> = listed.into_iter().map(|t| (t.name, t.digest)).collect();
    assert_eq!(over_http, pins);
    let servers = McpServers { servers: BTreeMap::from([("notes".to_string(), spec)]) };
    let mut g = gate(policy(&pins, &["notes__read_note", "notes__add_note"]));
    g.connect_mcp(&servers).await.unwrap();
    let out = g.run_async(&call("notes__read_note", json!({"note_id": "n1"})), CX()).await;
    let GateOutcome::Ok(data) = &out else { panic!("{out:?}") };
    assert_eq!(data.value()["text"], "Standup moved to 10:00.");
    assert_eq!(g.taint().label().integrity, Integrity::Untrusted);
    // a tool the policy does not name is not there; a write parks
    assert_eq!(g.run_async(&call("notes__delete_all", json!({})), CX()).await.code(), GateCode::NotAllowed);
    let parked = g.run_async(&call("notes__add_note", json!({"text": "Buy milk."})), CX()).await;
    assert!(matches!(parked, GateOutcome::NeedsApproval { .. }), "{parked:?}");
    let audit: Vec<&str> = g.audit().iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(audit, ["ok", "not_allowed", "needs_approval"]);
}

#[tokio::test]
#[ignore = "needs a Python with mcp: bridge/agentdojo/install.sh; .ci/run runs it"]
async fn mcp_tools_a_changed_tool_over_streamable_http_refuses_the_server_by_name() {
    let pins = reviewed_pins().await;
    let (_server, spec) = notes_over_http("rug").await;
    let servers = McpServers { servers: BTreeMap::from([("notes".to_string(), spec)]) };
    let err = gate(policy(&pins, &["notes__read_note"])).connect_mcp(&servers).await.unwrap_err();
    assert_eq!(err.code(), "mcp_tool_changed", "{err}");
}
