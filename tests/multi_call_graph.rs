//! The declared call graph: a graph with an edge missing, limited or narrowed changes the
//! outcome of the bundled rows as it should, naming the edge; an edge the coordinator
//! cannot carry is refused when the graph is read, so no edge can open what a body check
//! refuses.

use std::sync::Arc;

use rolegate::agent::TraceKind;
use rolegate::eval::{MultiRow, bundled_multi, parse_multi_table, run_multi};
use rolegate::multi::{CallGraph, CallGraphError, Kind, MultiEnv, MultiReason, MultiRun, RejectCode, Role};

use crate::util::env;

const PLANNER: &str = r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": ["question"]}"#;
const RESEARCHER: &str =
    r#"{"from": "researcher", "to": "reviewer", "kinds": ["finding"], "fields": ["claim", "sources"]}"#;
const REVIEWER: &str =
    r#"{"from": "reviewer", "to": "coordinator", "kinds": ["verdict"], "fields": ["approve", "notes"]}"#;

fn graph(edges: &[&str]) -> Result<CallGraph, CallGraphError> {
    CallGraph::from_json(&format!(r#"{{"edges": [{}]}}"#, edges.join(", ")))
}

fn menv_with(edges: &[&str]) -> Arc<MultiEnv> {
    MultiEnv::with_graph(&env(), Arc::new(graph(edges).unwrap())).unwrap()
}

fn row(id: &str) -> MultiRow {
    bundled_multi().unwrap().into_iter().find(|r| r.id == id).unwrap()
}

/// The coordinator's trace lines with `code`, as `detail`.
fn refusals(run: &MultiRun, code: RejectCode) -> Vec<String> {
    run.traces[0]
        .lines
        .iter()
        .filter(|l| l.kind == TraceKind::Message && l.code == code.as_str())
        .map(|l| l.detail().to_string())
        .collect()
}

#[tokio::test]
async fn the_bundled_graph_file_gives_every_seed_row_its_outcome() {
    let menv = MultiEnv::with_graph(&env(), CallGraph::bundled().unwrap()).unwrap();
    let spelled_out = menv_with(&[PLANNER, RESEARCHER, REVIEWER]);
    for row in bundled_multi().unwrap() {
        for m in [&menv, &spelled_out] {
            let (run, out) = run_multi(&row, m).await.unwrap();
            assert!(out.matches, "{}: {:?}", row.id, out.mismatches);
            assert!(refusals(&run, RejectCode::EdgeNotDeclared).is_empty());
        }
    }
}

#[tokio::test]
async fn without_researcher_to_reviewer_m01_and_m03_end_on_the_edge_named() {
    let menv = menv_with(&[PLANNER, REVIEWER]);
    for id in ["m01", "m03"] {
        let (run, _) = run_multi(&row(id), &menv).await.unwrap();
        assert_eq!(run.reason, MultiReason::RejectedMessage, "{id}");
        assert_eq!(run.rejected_codes(), [RejectCode::EdgeNotDeclared], "{id}: the edge before the body");
        assert_eq!(run.messages.len(), 1, "{id}: the brief crossed");
        assert_eq!(run.rejected[0].sender, Role::Researcher);
        let lines = refusals(&run, RejectCode::EdgeNotDeclared);
        assert_eq!(lines, ["researcher->reviewer finding: not declared"], "{id}");
        assert!(run.traces[2].lines.iter().any(|l| l.kind == TraceKind::Tool), "{id}: the researcher did read");
        assert!(!run.traces[3].lines.iter().any(|l| l.kind == TraceKind::Tool), "{id}: the reviewer never read");
    }
    // the same rows with the whole graph: m01 done, m03 refused by the filter
    let whole = menv_with(&[PLANNER, RESEARCHER, REVIEWER]);
    assert_eq!(run_multi(&row("m01"), &whole).await.unwrap().0.reason, MultiReason::Done);
    assert_eq!(run_multi(&row("m03"), &whole).await.unwrap().0.rejected_codes(), [RejectCode::InstructionLike]);
}

#[tokio::test]
async fn without_the_verdict_edge_m01_never_reaches_done() {
    let (run, _) = run_multi(&row("m01"), &menv_with(&[PLANNER, RESEARCHER])).await.unwrap();
    assert_eq!(run.reason, MultiReason::RejectedMessage);
    assert_eq!(run.messages.len(), 2);
    assert_eq!(refusals(&run, RejectCode::EdgeNotDeclared), ["reviewer->coordinator verdict: not declared"]);
    assert!(run.answer.is_none());
}

#[test]
fn an_extra_edge_the_coordinator_cannot_carry_is_refused_when_the_graph_is_read() {
    // m03 is refused by the instruction filter (a check of the finding's body, on the one
    // edge the finding takes): an added edge cannot carry it anywhere else, because the
    // reviewer writes verdicts and a verdict goes to the coordinator
    for kind in ["verdict", "brief", "finding"] {
        let extra = format!(r#"{{"from": "reviewer", "to": "researcher", "kinds": ["{kind}"], "fields": []}}"#);
        let err = graph(&[PLANNER, RESEARCHER, REVIEWER, &extra]).unwrap_err();
        assert!(
            matches!(err, CallGraphError::NotCarried { edge: 4, from: Role::Reviewer, to: Role::Researcher, kind: k } if k.as_str() == kind),
            "{kind}: {err}"
        );
    }
    let to_self = r#"{"from": "researcher", "to": "coordinator", "kinds": ["finding"], "fields": ["claim"]}"#;
    assert!(matches!(
        graph(&[PLANNER, RESEARCHER, REVIEWER, to_self]).unwrap_err(),
        CallGraphError::NotCarried { to: Role::Coordinator, kind: Kind::Finding, .. }
    ));
}

#[tokio::test]
async fn a_per_edge_limit_ends_m13_in_its_second_round_with_the_edge_named() {
    let limited = r#"{"from": "researcher", "to": "reviewer", "kinds": ["finding"], "fields": ["claim", "sources"], "max_per_run": 1}"#;
    let (run, _) = run_multi(&row("m13"), &menv_with(&[PLANNER, limited, REVIEWER])).await.unwrap();
    assert_eq!(run.reason, MultiReason::RejectedMessage);
    assert_eq!(run.rounds, 2);
    assert_eq!(run.messages.len(), 4, "brief, finding, verdict, then the second brief");
    assert_eq!(run.rejected_codes(), [RejectCode::EdgeLimit]);
    assert_eq!(refusals(&run, RejectCode::EdgeLimit), ["researcher->reviewer finding: limit 1 reached"]);
    // with no limit of its own the edge lets both rounds through, as the seed row expects
    let (run, out) = run_multi(&row("m13"), &menv_with(&[PLANNER, RESEARCHER, REVIEWER])).await.unwrap();
    assert!(out.matches && run.reason == MultiReason::RoundLimit);
}

#[tokio::test]
async fn a_field_the_edge_does_not_let_cross_refuses_the_message() {
    let no_notes = r#"{"from": "reviewer", "to": "coordinator", "kinds": ["verdict"], "fields": ["approve"]}"#;
    let (run, _) = run_multi(&row("m01"), &menv_with(&[PLANNER, RESEARCHER, no_notes])).await.unwrap();
    assert_eq!(run.rejected_codes(), [RejectCode::FieldNotAllowed]);
    assert_eq!(run.messages.len(), 2);
    assert_eq!(
        refusals(&run, RejectCode::FieldNotAllowed),
        ["reviewer->coordinator verdict: field notes may not cross"]
    );
    let no_question = r#"{"from": "planner", "to": "researcher", "kinds": ["brief"], "fields": []}"#;
    let (run, _) = run_multi(&row("m01"), &menv_with(&[no_question, RESEARCHER, REVIEWER])).await.unwrap();
    assert_eq!(run.rejected_codes(), [RejectCode::FieldNotAllowed]);
    assert!(run.messages.is_empty());
    assert!(run.traces[2].lines.is_empty(), "the researcher never started");
}

#[tokio::test]
async fn a_row_may_carry_its_own_call_graph_and_a_bad_one_is_refused_on_its_field() {
    let line = format!(
        r#"{{"id": "g1", "design": "multi", "user": "kwame", "goal": "Status of T-601 and our refund policy?", "call_graph": [{PLANNER}, {REVIEWER}], "expect": {{"reason": "rejected_message", "messages": 1, "rejected": ["edge_not_declared"], "denied": [], "emails": 0}}}}"#
    );
    let rows = parse_multi_table(&line, "g.jsonl").unwrap();
    let (_, out) = run_multi(&rows[0], &crate::util::menv()).await.unwrap();
    assert!(out.matches, "{:?}", out.mismatches);
    let bad = line.replace(r#""to": "coordinator""#, r#""to": "auditor""#);
    let err = parse_multi_table(&bad, "g.jsonl").unwrap_err().to_string();
    assert!(err.starts_with("g.jsonl:1: field `call_graph`") && err.contains("unknown role \"auditor\""), "{err}");
}

#[test]
fn call_graph_on_the_command_line_is_used_for_the_rows_and_a_bad_file_is_refused_by_name() {
    let dir = crate::util::temp_dir("call-graph");
    let file = dir.join("graph.json");
    std::fs::write(&file, format!(r#"{{"edges": [{PLANNER}, {REVIEWER}]}}"#)).unwrap();
    let table = concat!(env!("CARGO_MANIFEST_DIR"), "/data/multi_scenarios.jsonl");
    let run = |graph: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
            .args(["suite", table, "--call-graph"])
            .arg(graph)
            .output()
            .unwrap()
    };
    let out = run(&file);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "rows no longer match: {text}");
    let m01 = text.lines().find(|l| l.starts_with("m01")).unwrap();
    assert!(m01.contains("rejected_message") && m01.contains("rejected=[edge_not_declared]"), "{m01}");
    std::fs::write(&file, format!(r#"{{"edges": [{PLANNER}, {PLANNER}]}}"#)).unwrap();
    let out = run(&file);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("graph.json") && err.contains("edge 2: planner->researcher is declared twice"), "{err}");
}
