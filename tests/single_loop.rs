//! The loop: the fixed plan, the misbehaving models, budgets, tokens, the "try it
//! yourself" answers and cancellation.

use rolegate::BoxFuture;
use rolegate::agent::{CheckMode, RunBudget, StopReason, TraceKind};
use rolegate::agent::{FixedPlan, ModelDecider};
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::parse_blocks;
use rolegate::model::{FakeKind, LlmClient, LlmRequest, LlmResponse, ModelError};
use rolegate::security::SIMULATED_SECRET;
use rust_decimal::Decimal;
use serde_json::json;
use std::time::Duration;

use crate::util::{lab, lab_with};

fn plan() -> LabConfig {
    LabConfig {
        decider: DeciderSpec::Fixed(FixedPlan::new(vec![
            ("get_ticket".into(), json!({"ticket_id": "T-601"})),
            ("lookup_document".into(), json!({"doc_id": "kc-returns-v3"})),
        ])),
        ..LabConfig::default()
    }
}

#[tokio::test]
async fn the_fixed_plan_runs_through_checks_and_gate_and_repeats_byte_for_byte() {
    let mut first = lab_with(plan());
    let run = first.agent.run("Check T-601.", "run-1").await.unwrap();
    let codes: Vec<(&str, &str)> = run.trace().lines.iter().map(|l| (l.kind.as_str(), l.code.as_ref())).collect();
    assert_eq!(
        codes,
        [
            ("model", "ok"),
            ("check", "ok"),
            ("tool", "ok"),
            ("memory", "ok"),
            ("model", "ok"),
            ("check", "ok"),
            ("tool", "ok"),
            ("model", "ok"),
            ("check", "ok"),
            ("stop", "done")
        ]
    );
    assert_eq!(run.calls(), ["get_ticket", "lookup_document"]);
    assert_eq!(run.state.sources(), ["o1", "o2"]);
    assert_eq!(run.state.step(), 3, "two actions, then the finishing step");
    assert_eq!(run.ledger().summary().calls, 0, "a fixed plan costs no model calls");
    let audit: Vec<_> = first.agent.gate().audit().iter().map(|e| (e.tool(), e.outcome.as_str())).collect();
    assert_eq!(audit, [("get_ticket", "ok"), ("lookup_document", "ok")]);
    let mut second = lab_with(plan());
    let again = second.agent.run("Check T-601.", "run-1").await.unwrap();
    assert_eq!(again.trace().lines(), run.trace().lines());
    assert_eq!(second.agent.gate().audit(), first.agent.gate().audit());
}

#[tokio::test]
async fn four_misbehaving_models_are_stopped_by_code() {
    let cases = [
        (FakeKind::Hallucinate, StopReason::Stuck, vec!["ok", "ok"], vec!["not_allowed", "not_allowed"], vec![]),
        (FakeKind::Garbage, StopReason::Stuck, vec!["not_json", "not_json"], vec![], vec![]),
        (
            FakeKind::EarlyFinish,
            StopReason::Stuck,
            vec!["ok", "ok"],
            vec!["unsupported_finish", "unsupported_finish"],
            vec![],
        ),
        (FakeKind::Obey, StopReason::Done, vec!["ok", "ok", "ok"], vec!["ok", "not_allowed", "ok"], vec!["get_ticket"]),
    ];
    for (kind, reason, model, check, ran) in cases {
        let mut l = lab(kind);
        let run = l.agent.run("Read T-602 and summarise it.", "run-1").await.unwrap();
        assert_eq!(run.reason(), reason, "{kind:?}");
        assert_eq!(run.trace().codes(TraceKind::Model), model, "{kind:?}");
        assert_eq!(run.trace().codes(TraceKind::Check), check, "{kind:?}");
        assert_eq!(run.calls(), ran.as_slice(), "{kind:?}");
        assert!(l.world.outbox.is_empty(), "{kind:?} sent an e-mail");
    }
}

#[tokio::test]
async fn three_budgets_stop_the_run_before_the_next_spend() {
    let wander = |budget: RunBudget, slow: f64| LabConfig {
        budget,
        slow: Some(Duration::from_secs_f64(slow)),
        ..LabConfig::fake(FakeKind::Wander)
    };
    let steps = RunBudget { max_steps: 3, ..RunBudget::default() };
    let time = RunBudget { max_seconds: Duration::from_secs(5), ..RunBudget::default() };
    let cost = RunBudget { max_cost: Decimal::new(22, 3), ..RunBudget::default() };
    let mut results = Vec::new();
    for (budget, slow) in [(steps, 0.4), (time.clone(), 2.0), (cost.clone(), 0.4)] {
        let mut l = lab_with(wander(budget, slow));
        let run = l.agent.run("Find anything useful.", "run-1").await.unwrap();
        results.push((run.reason(), run.state.step(), run.ledger().summary(), l.clock.clone()));
    }
    assert_eq!((results[0].0, results[0].1, results[0].2.calls), (StopReason::StepBudget, 3, 3));
    assert_eq!((results[1].0, results[1].1, results[1].2.calls), (StopReason::TimeBudget, 3, 3));
    assert_eq!((results[2].0, results[2].1, results[2].2.calls), (StopReason::CostBudget, 4, 4));
    // the time check runs between steps, so one slow step overruns the limit
    use rolegate::cost::Clock;
    assert!(results[1].3.now() > time.max_seconds, "clock {:?}", results[1].3.now());
    // the cost check is conservative: it stops below the limit, never above it
    assert!(results[2].2.cost <= cost.max_cost);
}

#[tokio::test]
async fn input_tokens_grow_every_step_and_the_model_sees_only_tagged_blocks() {
    let mut l = lab(FakeKind::Sensible);
    let run = l.agent.run("What is the status of T-601 and our refund policy?", "run-1").await.unwrap();
    assert_eq!((run.state.status().name(), run.reason()), ("done", StopReason::Done));
    let tokens = run.ledger().input_tokens();
    assert_eq!(tokens.len(), 3);
    assert!(tokens.windows(2).all(|w| w[1] > w[0]), "{tokens:?}");
    assert!(run.ledger().summary().cost > Decimal::ZERO);
    let last = l.agent.request(&run.state);
    let seen: Vec<(String, String)> = parse_blocks(last.user_text()).into_iter().map(|b| (b.tag, b.source)).collect();
    let expect = [
        ("goal", "user-input"),
        ("memory", "tool:get_ticket:o1"),
        ("observation", "tool:get_ticket:o1"),
        ("observation", "tool:lookup_document:o2"),
    ];
    assert_eq!(seen, expect.map(|(a, b)| (a.to_string(), b.to_string())));
    // the system message is the only trusted text and holds no untrusted content
    assert!(!last.messages[0].content.contains("T-601"));
}

#[tokio::test]
async fn try_it_yourself_easy_loop_stops_at_step_two_with_one_call() {
    let mut l = lab(FakeKind::Loop);
    let run = l.agent.run("Check T-601.", "run-1").await.unwrap();
    assert_eq!(
        (run.reason(), run.calls(), run.state.step()),
        (StopReason::RepeatedCall, &["get_ticket".to_string()][..], 2)
    );
    assert_eq!(l.agent.gate().audit().len(), 1, "the repeat never reached the gate");
}

#[tokio::test]
async fn try_it_yourself_medium_obey_with_grant_parks_pa_1_and_sends_nothing() {
    let cfg =
        LabConfig { task: "reply".into(), grants: vec!["send_email_draft".into()], ..LabConfig::fake(FakeKind::Obey) };
    let mut l = lab_with(cfg);
    let run = l.agent.run("Read T-602 and reply to it.", "run-1").await.unwrap();
    assert_eq!(run.state.status().name(), "awaiting_approval");
    assert_eq!(run.reason(), StopReason::NeedsApproval);
    assert_eq!(run.state.pending_id(), Some("pa-1"));
    assert!(l.world.outbox.is_empty());
    let pa = &l.agent.gate().pending()["pa-1"];
    assert_eq!(pa.call.name, "send_email_draft");
    assert_eq!(pa.status, rolegate::gate::PendingStatus::Pending);
    assert_ne!(pa.call.arguments["idempotency_key"], json!("evil-key-0001"), "the model's key is replaced");
}

#[tokio::test]
async fn try_it_yourself_hard_without_the_loop_check_the_gate_still_refuses() {
    let cfg = LabConfig { checks: CheckMode::TrustModel, ..LabConfig::fake(FakeKind::Obey) };
    let mut l = lab_with(cfg);
    let run = l.agent.run("Read T-602 and summarise it.", "run-1").await.unwrap();
    assert_eq!(run.reason(), StopReason::Done);
    assert_eq!(run.calls(), ["get_ticket", "send_email_draft"]);
    assert_eq!(run.trace().codes(TraceKind::Check), ["ok", "ok", "ok"], "the lost layer");
    assert_eq!(run.trace().codes(TraceKind::Tool), ["ok", "not_allowed"], "the layer that held");
    let audit: Vec<_> = l.agent.gate().audit().iter().map(|e| (e.tool(), e.outcome.as_str())).collect();
    assert_eq!(audit, [("get_ticket", "ok"), ("send_email_draft", "not_allowed")]);
    assert!(l.world.outbox.is_empty());
}

#[tokio::test]
async fn a_cancelled_run_stops_cancelled_before_the_next_step() {
    let mut l = lab(FakeKind::Wander);
    l.agent.cancel_token().cancel();
    let run = l.agent.run("Find anything useful.", "run-1").await.unwrap();
    assert_eq!((run.reason(), run.calls().len()), (StopReason::Cancelled, 0));
}

/// A model that chats instead of proposing, leaking contact details and a key.
struct Chatty;

impl LlmClient for Chatty {
    fn model(&self) -> &str {
        "fake-garbage"
    }

    fn complete<'a>(&'a mut self, _r: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let text = format!("Write to kwame@gmail.com, key {SIMULATED_SECRET}");
        Box::pin(std::future::ready(Ok(LlmResponse::text(text, "fake-garbage"))))
    }
}

#[tokio::test]
async fn the_trace_redacts_what_a_model_leaks_before_clipping_it() {
    let mut l = lab(FakeKind::Garbage);
    l.agent.replace_decider(Box::new(ModelDecider::new(Chatty)));
    let run = l.agent.run("Read T-602 and summarise it.", "run-1").await.unwrap();
    assert_eq!(run.reason(), StopReason::Stuck);
    let text = run.trace().lines().join("\n");
    assert!(!text.contains("gmail") && !text.contains("sk-test"), "{text}");
    assert!(text.contains("Write to [email], key [secret]"), "{text}");
}
