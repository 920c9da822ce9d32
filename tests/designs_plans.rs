//! Structured plans: the six fake planners reproduce the plan-check table, each after one
//! model call and with nothing run when rejected; the plan parser and checker refuse bad
//! input with a named code, never a panic.

use rolegate::agent::FixedPlan;
use rolegate::agent::{AgentState, TraceKind};
use rolegate::design::{
    Design, DesignConfig, PlanCode, PlanFake, PlanFakeKind, check_plan, parse_plan, plan_then_execute, run_design,
};
use rolegate::eval::plan_checks;
use rolegate::lab::{DeciderSpec, LabConfig};
use serde_json::json;

use crate::util::{env, lab_with};

const GOAL: &str = "Status of T-601 and our refund policy?";

#[tokio::test]
async fn six_planners_reproduce_the_plan_check_table() {
    let rows = plan_checks(&env(), GOAL).await.unwrap();
    let got: Vec<(&str, &str, Vec<String>)> = rows
        .iter()
        .map(|r| (r.planner, r.code.as_str(), if r.problems.is_empty() { r.calls.clone() } else { r.problems.clone() }))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        [
            ("sensible", "done", s(&["get_ticket", "lookup_document"])),
            ("prose", "plan_rejected", s(&["not_json"])),
            ("long", "plan_rejected", s(&["invalid_plan"])),
            ("bad_tool", "plan_rejected", s(&["step 1: not_allowed"])),
            ("bad_args", "plan_rejected", s(&["step 1: invalid_arguments"])),
            ("write", "plan_rejected", s(&["step 3: not_allowed"])),
        ]
    );
    assert!(rows.iter().all(|r| r.model_calls == 1), "each after one model call");
}

#[tokio::test]
async fn a_rejected_plan_runs_nothing_and_a_clean_one_runs_through_the_gate() {
    for kind in
        [PlanFakeKind::Prose, PlanFakeKind::Long, PlanFakeKind::BadTool, PlanFakeKind::BadArgs, PlanFakeKind::Write]
    {
        let mut lab = lab_with(LabConfig { decider: DeciderSpec::Fixed(FixedPlan::default()), ..LabConfig::default() });
        let out = plan_then_execute(&mut PlanFake::new(kind), &mut lab.agent, GOAL, "run-1").await.unwrap();
        assert!(out.run.is_none(), "{kind:?}");
        assert!(lab.agent.gate().audit().is_empty(), "{kind:?}: a tool ran");
        assert_eq!(out.ledger.summary().calls, 1, "{kind:?}");
    }
    let out = run_design(Design::Plan, GOAL, &env(), &DesignConfig::default()).await.unwrap();
    let plan_lines = out.trace.codes(TraceKind::Plan);
    assert_eq!(plan_lines, ["ok", "ok"], "one checked line per step before anything runs");
    let first_tool = out.trace.lines.iter().position(|l| l.kind == TraceKind::Tool).unwrap();
    let last_plan = out.trace.lines.iter().rposition(|l| l.kind == TraceKind::Plan).unwrap();
    assert!(last_plan < first_tool, "{:#?}", out.trace.lines());
    assert_eq!(out.trace.codes(TraceKind::Tool), ["ok", "ok"]);
    assert_eq!(out.answer.as_deref(), Some("Plan finished after 2 successful steps."));
}

#[test]
fn the_plan_parser_refuses_junk_unknown_fields_and_oversized_plans() {
    let step = json!({"tool": "get_ticket", "arguments": {"ticket_id": "T-601"}, "reason": "read it"});
    let ok = json!({ "steps": [step.clone()] }).to_string();
    assert!(parse_plan(&ok).is_ok());
    let cases = [
        (String::new(), PlanCode::NotJson),
        ("First I will read the ticket.".into(), PlanCode::NotJson),
        ("[1, 2]".into(), PlanCode::NotJson),
        ("{\"steps\": [".into(), PlanCode::NotJson),
        ("[".repeat(100_000), PlanCode::InvalidPlan), // too large before it is parsed
        (json!({"steps": []}).to_string(), PlanCode::InvalidPlan),
        (json!({"steps": [step.clone()], "grant": "send_email_draft"}).to_string(), PlanCode::InvalidPlan),
        (
            json!({"steps": [{"tool": "get_ticket", "arguments": {}, "reason": "r", "why": 1}]}).to_string(),
            PlanCode::InvalidPlan,
        ),
        (json!({"steps": [{"tool": "get_ticket", "arguments": {}, "reason": ""}]}).to_string(), PlanCode::InvalidPlan),
        (
            json!({"steps": [{"tool": "get_ticket", "arguments": {}, "reason": "r".repeat(121)}]}).to_string(),
            PlanCode::InvalidPlan,
        ),
        (json!({"steps": vec![step.clone(); 6]}).to_string(), PlanCode::InvalidPlan),
        (json!({"steps": [{"tool": 7, "arguments": {}, "reason": "r"}]}).to_string(), PlanCode::InvalidPlan),
        (format!("{{\"steps\": [], \"pad\": \"{}\"}}", "x".repeat(10_000)), PlanCode::InvalidPlan),
    ];
    for (text, code) in cases {
        assert_eq!(parse_plan(&text), Err(code), "{}", &text[..text.len().min(60)]);
    }
}

#[test]
fn repeats_and_writes_are_named_per_step_even_where_the_write_is_allowed() {
    let lab =
        lab_with(LabConfig { task: "reply".into(), grants: vec!["send_email_draft".into()], ..LabConfig::default() });
    let state = AgentState::new("run-1", "kwame", "reply", GOAL).unwrap();
    let read = json!({"tool": "get_ticket", "arguments": {"ticket_id": "T-601"}, "reason": "read it"});
    let mail = json!({"tool": "send_email_draft", "reason": "tell them", "arguments":
        {"to": "kwame@example.com", "subject": "s", "body": "b", "idempotency_key": "k-1"}});
    let plan = parse_plan(&json!({ "steps": [read.clone(), read, mail] }).to_string()).unwrap();
    let problems: Vec<String> = check_plan(&plan, &lab.agent, &state).iter().map(ToString::to_string).collect();
    assert_eq!(problems, ["step 2: repeated_call", "step 3: write_step"]);
}
