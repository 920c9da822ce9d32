//! The PolicyPal loop: parallel calls, the soft repeat, the search guard, confirmation
//! cards that run exactly what was shown, and budgets that end in an honest give-up.

use rolegate::BoxFuture;
use rolegate::agent::{StopReason, TraceKind};
use rolegate::design::{
    DesignError, GIVE_UP, PalBudget, PalConfig, PalKind, PalReply, PalRun, TaskGroup, bundled_tasks,
};
use rolegate::design::{NO_FURTHER_RESULTS, PalFake};
use rolegate::eval::{TraceSpec, grade};
use rolegate::eval::{median, pal_row};
use rolegate::gate::PendingStatus;
use rolegate::model::parse_blocks;
use rolegate::model::{LlmClient, LlmRequest, LlmResponse, MessageRole, ModelError};
use serde_json::json;
use std::time::Duration;

use crate::util::env;

const TWO_SEARCHES: &str = "Can I work from home after parental leave, and how do I fix my VPN?";
const EMAIL: &str = "E-mail the refund policy for T-601 to kwame@example.com.";

async fn run(cfg: PalConfig, goal: &str) -> (PalRun, rolegate::design::PalLab) {
    let mut lab = cfg.build(&env());
    let run = lab.pal.run(goal, "run-1").await.unwrap();
    (run, lab)
}

fn tool_lines_at(run: &PalRun, step: u32) -> Vec<String> {
    run.run
        .trace()
        .lines
        .iter()
        .filter(|l| l.step == step && l.kind == TraceKind::Tool)
        .map(|l| l.detail().to_string())
        .collect()
}

/// The text of every tool result, in order.
fn results(run: &PalRun) -> Vec<String> {
    run.messages
        .iter()
        .filter(|m| m.role == MessageRole::Tool)
        .flat_map(|m| parse_blocks(&m.content))
        .map(|b| b.text)
        .collect()
}

#[tokio::test]
async fn parallel_calls_cost_fewer_model_calls_than_sequential_ones_on_a_two_search_task() {
    let (par, par_lab) = run(PalConfig::new(PalKind::Parallel), TWO_SEARCHES).await;
    let (seq, _) = run(PalConfig::new(PalKind::Sequential), TWO_SEARCHES).await;
    for r in [&par, &seq] {
        assert_eq!(r.run.reason(), StopReason::Done);
        assert_eq!(r.run.calls(), ["search_documents", "search_documents"]);
    }
    assert_eq!((par.run.ledger().summary().calls, seq.run.ledger().summary().calls), (2, 3));
    assert_eq!(tool_lines_at(&par, 1), ["search_documents", "search_documents"], "both ran before the 2nd call");
    assert_eq!(tool_lines_at(&seq, 1), ["search_documents"]);
    let audit: Vec<_> = par_lab.pal.gate.audit().iter().map(|e| (e.tool(), e.outcome.as_str())).collect();
    assert_eq!(audit, [("search_documents", "ok"), ("search_documents", "ok")], "every call went through the gate");
    let PalReply::Answer { text, .. } = &par.reply else { panic!("{:?}", par.reply) };
    assert!(text.contains("No policy covers"), "{text}");
}

#[tokio::test]
async fn across_the_tasks_parallel_calls_lower_the_median_steps() {
    let env = env();
    let tasks = bundled_tasks().unwrap();
    let mut medians = Vec::new();
    for kind in [PalKind::Sequential, PalKind::Parallel] {
        let mut steps = Vec::new();
        for task in &tasks {
            let row = pal_row(&env, task, kind, true).await.unwrap();
            assert!(row.covered, "{} {kind:?}", task.id);
            steps.push(row.model_calls);
        }
        medians.push(median(&steps));
    }
    assert!(medians[1] < medians[0], "{medians:?}");
    assert_eq!(medians.iter().map(ToString::to_string).collect::<Vec<_>>(), ["3", "2"]);
    assert!(tasks.iter().any(|t| t.group == TaskGroup::Policypal));
}

#[tokio::test]
async fn an_exact_repeat_gets_a_soft_error_and_the_run_goes_on() {
    let (r, lab) = run(PalConfig::new(PalKind::Flail), TWO_SEARCHES).await;
    assert_eq!(r.run.reason(), StopReason::Done);
    let checks = r.run.trace().codes(TraceKind::Check);
    let at = checks.iter().position(|c| *c == "repeated_call").expect("a repeat");
    assert!(checks[at + 1..].contains(&"ok"), "calls after the repeat still run: {checks:?}");
    let texts = results(&r);
    assert_eq!(texts[2], "error repeated_call: this exact call already ran; use its earlier result o2");
    let sent = lab.pal.gate.audit().iter().filter(|e| e.tool() == "search_documents").count();
    assert_eq!(sent, 3, "the repeat never reached the gate");
}

#[tokio::test]
async fn the_fourth_search_gets_no_further_results_and_the_model_stops_looking() {
    let (r, lab) = run(PalConfig::new(PalKind::Flail), TWO_SEARCHES).await;
    assert_eq!(r.run.calls(), ["search_documents"; 3], "three searches ran");
    let texts = results(&r);
    assert_eq!(texts.last().map(String::as_str), Some(NO_FURTHER_RESULTS), "the fourth distinct search");
    assert!(r.run.trace().codes(TraceKind::Check).contains(&"no_further_results"));
    let PalReply::Answer { text, sources } = &r.reply else { panic!("{:?}", r.reply) };
    assert_eq!(text, "The policies do not cover this.");
    assert_eq!(sources, &["o1", "o2", "o4"], "cites the three searches that ran");
    assert_eq!(lab.pal.gate.count("run-1", "search_documents"), 3);
    // without the guard the same model flails until the step budget, and gives up honestly
    let mut cfg = PalConfig::new(PalKind::Flail);
    cfg.search_guard = None;
    let (r, _) = run(cfg, TWO_SEARCHES).await;
    assert_eq!(r.run.reason(), StopReason::StepBudget);
    assert_eq!(r.run.calls().len(), 5);
    assert_eq!(r.reply, PalReply::GaveUp { message: GIVE_UP.into(), reason: StopReason::StepBudget });
}

#[tokio::test]
async fn every_budget_stop_returns_the_give_up_message_not_a_guess() {
    let flail = |budget: PalBudget, slow: Option<u64>| {
        let mut cfg = PalConfig::new(PalKind::Flail);
        cfg.search_guard = None;
        cfg.budget = budget;
        cfg.slow = slow.map(Duration::from_secs);
        cfg
    };
    let cases = [
        (flail(PalBudget { max_steps: 3, ..PalBudget::default() }, None), StopReason::StepBudget, 3),
        (flail(PalBudget { max_tokens: 2_000, ..PalBudget::default() }, None), StopReason::CostBudget, 3),
        (flail(PalBudget::default(), Some(8)), StopReason::TimeBudget, 3),
    ];
    for (cfg, reason, calls) in cases {
        let (r, lab) = run(cfg, TWO_SEARCHES).await;
        assert_eq!(r.run.reason(), reason);
        assert_eq!(r.run.ledger().summary().calls, calls, "{reason}");
        assert_eq!(r.reply, PalReply::GaveUp { message: GIVE_UP.into(), reason });
        assert_eq!(r.run.state.answer(), None, "{reason}: no half-finished answer");
        let s = r.run.ledger().summary();
        if reason == StopReason::CostBudget {
            assert!(s.input_tokens + s.output_tokens <= 2_000, "the token budget is checked before it is crossed");
        }
        if reason == StopReason::TimeBudget {
            use rolegate::cost::Clock;
            assert_eq!(lab.clock.now(), Duration::from_secs(24), "checked before each call on the injected clock");
        }
    }
}

/// A model that would now write a different e-mail than the one on the card.
struct Fickle(PalFake);

impl LlmClient for Fickle {
    fn model(&self) -> &str {
        self.0.model()
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let mut r = self.0.respond(request);
        for c in &mut r.tool_calls {
            if c.name == "send_email_draft" {
                c.arguments["to"] = json!("records-export@example.org");
                c.arguments["body"] = json!("Every record we hold.");
            }
        }
        Box::pin(std::future::ready(Ok(r)))
    }
}

#[tokio::test]
async fn a_side_effect_stops_the_loop_with_a_card_and_confirming_runs_exactly_the_card() {
    let (parked, mut lab) = run(PalConfig::new(PalKind::Parallel), EMAIL).await;
    assert_eq!(parked.run.reason(), StopReason::NeedsApproval);
    let card = parked.card().cloned().expect("a card");
    assert_eq!(card.tool, "send_email_draft");
    assert_eq!(card.arguments["to"], "kwame@example.com");
    assert_eq!(card.arguments["body"], "T-601 is open. kc-returns-v3 applies.");
    assert!(card.arguments["idempotency_key"].as_str().unwrap().starts_with("ak-"), "the application's key");
    assert!(lab.world.outbox.is_empty(), "nothing sent while the card waits");
    let calls_before = parked.run.ledger().summary().calls;

    // the model would now propose a different e-mail; the card is what runs
    lab.pal.client = Box::new(Fickle(PalFake::new(PalKind::Parallel)));
    let asked_again = lab.pal.request(&parked.messages[..parked.messages.len() - 1]);
    let now = lab.pal.client.complete(&asked_again).await.unwrap();
    assert_ne!(now.tool_calls[0].arguments["to"], card.arguments["to"]);

    let done = lab.pal.confirm(parked, "kwame").await.unwrap();
    let sent = lab.world.outbox.sent();
    assert_eq!(sent.len(), 1);
    let e = &sent[0];
    assert_eq!(
        json!({"to": e.to, "subject": e.subject, "body": e.body, "idempotency_key": e.idempotency_key}),
        card.arguments
    );
    let lines: Vec<(&str, &str)> = done.run.trace().lines.iter().map(|l| (l.kind.as_str(), l.code.as_ref())).collect();
    let human = lines.iter().position(|l| *l == ("human", "confirmed")).unwrap();
    assert_eq!(lines[human + 1], ("tool", "ok"), "the card ran right after the decision");
    let model_after = lines[..human].iter().filter(|l| l.0 == "model").count();
    assert_eq!(model_after as u64, calls_before, "no model call between the card and the run");
    assert_eq!(done.run.reason(), StopReason::Done);
    let PalReply::Answer { text, .. } = &done.reply else { panic!("{:?}", done.reply) };
    assert!(text.ends_with("The e-mail was sent."), "{text}");
    let g = grade(&done.run, &TraceSpec::must_call(&["get_ticket", "lookup_document", "send_email_draft"]));
    assert!(g.task_ok && g.safe_ok, "{g:?}");
}

#[tokio::test]
async fn cancelling_a_card_records_cancelled_by_user_and_sends_nothing() {
    let (parked, mut lab) = run(PalConfig::new(PalKind::Parallel), EMAIL).await;
    let pending = parked.card().unwrap().pending_id.clone();
    assert!(matches!(lab.pal.confirm(parked.clone(), "lena").await, Err(DesignError::NotYourCard(_))));
    let done = lab.pal.cancel_card(parked, "kwame").await.unwrap();
    assert!(lab.world.outbox.is_empty());
    assert_eq!(lab.pal.gate.pending()[&pending].status, PendingStatus::Cancelled);
    assert_eq!(results(&done).last().map(String::as_str), Some("cancelled by user"));
    assert_eq!(done.run.trace().codes(TraceKind::Human), ["cancelled"]);
    let PalReply::Answer { text, .. } = &done.reply else { panic!("{:?}", done.reply) };
    assert!(text.ends_with("The e-mail was not sent: you cancelled it."), "{text}");
    assert!(matches!(lab.pal.cancel_card(done, "kwame").await, Err(DesignError::NoCard)));
}

#[tokio::test]
async fn without_a_grant_the_effect_is_refused_and_never_becomes_a_card() {
    let mut cfg = PalConfig::new(PalKind::Parallel);
    cfg.grants.clear();
    let (r, lab) = run(cfg, EMAIL).await;
    assert!(r.card().is_none());
    assert_eq!(r.run.reason(), StopReason::Done);
    assert!(results(&r).iter().any(|t| t.starts_with("error not_granted")), "{:?}", results(&r));
    assert!(lab.world.outbox.is_empty());
}

/// A model that answers each turn with a different kind of bad reply, then mixes a read
/// with a side effect in one reply.
struct Hostile;

impl LlmClient for Hostile {
    fn model(&self) -> &str {
        "fake-sensible"
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        use rolegate::model::RequestedCall;
        let call = |id: &str, name: &str, arguments: serde_json::Value| RequestedCall {
            id: id.into(),
            name: name.into(),
            arguments,
        };
        let doc = json!({"doc_id": "kc-returns-v3"});
        let turn = request.messages.iter().filter(|m| m.role == MessageRole::Assistant).count();
        let (text, calls) = match turn {
            0 => (
                String::new(),
                (0..6).map(|i| call(&format!("c{i}"), "get_ticket", json!({"ticket_id": "T-601"}))).collect(),
            ),
            1 => (String::new(), vec![call("same", "get_ticket", json!({})), call("same", "get_ticket", json!({}))]),
            2 => (
                String::new(),
                vec![
                    call("a", "rm_rf", json!({})),
                    call("b", "get_ticket", json!(["T-601"])),
                    call("c", "lookup_document", json!({"doc_id": "kc-returns-v3", "extra": 1})),
                ],
            ),
            3 => ("Sure! I will look into it.".to_string(), Vec::new()),
            4 => (
                json!({"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}).to_string(),
                Vec::new(),
            ),
            5 => (json!({"action": "finish", "answer": "done", "sources": ["o99"]}).to_string(), Vec::new()),
            _ => (
                String::new(),
                vec![
                    call("d", "lookup_document", doc),
                    call(
                        "e",
                        "send_email_draft",
                        json!({"to": "kwame@example.com", "subject": "s", "body": "b", "idempotency_key": "k-1"}),
                    ),
                ],
            ),
        };
        Box::pin(std::future::ready(Ok(LlmResponse {
            text,
            model: "fake-sensible".into(),
            usage: None,
            tool_calls: calls,
        })))
    }
}

#[tokio::test]
async fn every_bad_reply_gets_a_named_code_and_a_mixed_reply_defers_its_read_behind_the_card() {
    let mut cfg = PalConfig::new(PalKind::Parallel);
    cfg.budget = PalBudget { max_steps: 10, max_stuck: 10, max_tokens: 100_000, ..PalBudget::default() };
    let mut lab = cfg.build(&env());
    lab.pal.client = Box::new(Hostile);
    let r = lab.pal.run("Reply to T-601 about returns.", "run-1").await.unwrap();
    let trace = r.run.trace();
    assert_eq!(
        trace.codes(TraceKind::Model),
        ["too_many_calls", "bad_call_id", "ok", "not_json", "not_native", "unsupported_finish", "ok"]
    );
    assert_eq!(
        trace.codes(TraceKind::Check),
        ["not_allowed", "invalid_arguments", "invalid_arguments", "ok", "deferred"]
    );
    assert_eq!(r.run.reason(), StopReason::NeedsApproval);
    let audit: Vec<_> = lab.pal.gate.audit().iter().map(|e| (e.tool(), e.outcome.as_str())).collect();
    assert_eq!(audit, [("send_email_draft", "needs_approval")], "nothing else reached the gate");
    assert!(results(&r).last().unwrap().starts_with("not run: waiting for the user to confirm send_email_draft"));
    assert!(lab.world.outbox.is_empty());
}

#[tokio::test]
async fn a_model_that_only_chats_is_stuck_and_gets_the_give_up_message() {
    struct Chatty;
    impl LlmClient for Chatty {
        fn model(&self) -> &str {
            "fake-sensible"
        }
        fn complete<'a>(&'a mut self, _r: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
            Box::pin(std::future::ready(Ok(LlmResponse::text("Happy to help with that!", "fake-sensible"))))
        }
    }
    let mut lab = PalConfig::new(PalKind::Parallel).build(&env());
    lab.pal.client = Box::new(Chatty);
    let r = lab.pal.run("Status of T-601?", "run-1").await.unwrap();
    assert_eq!(r.reply, PalReply::GaveUp { message: GIVE_UP.into(), reason: StopReason::Stuck });
    assert_eq!(r.run.ledger().summary().calls, 2);
}

#[tokio::test]
async fn the_same_goal_gives_the_same_trace_and_conversation_byte_for_byte() {
    for kind in [PalKind::Parallel, PalKind::Sequential, PalKind::Flail] {
        let (a, _) = run(PalConfig::new(kind), TWO_SEARCHES).await;
        let (b, _) = run(PalConfig::new(kind), TWO_SEARCHES).await;
        assert_eq!(a.run.trace().lines().join("\n"), b.run.trace().lines().join("\n"), "{kind:?}");
        assert_eq!(a.messages, b.messages, "{kind:?}");
        assert_eq!(a.run.ledger(), b.run.ledger(), "{kind:?}");
    }
}
