//! Faults of a run: cancellation at every step index of a long run, from inside a model
//! call (answered or never answered) and from a checkpoint hook, for the single-agent loop
//! and the PolicyPal loop (each run ends `cancelled` and no tool starts after the cancel);
//! and a tool that hangs or panics under the gate (a `tool_timeout` or `tool_panicked`
//! naming it, and the run goes on), added through `ToolGate::with_tool` without a way
//! around the allowlist, the argument types, the limits or the approval of writes.

use rolegate::BoxFuture;
use rolegate::agent::{AgentState, RunBudget, StopReason, TraceKind};
use rolegate::agent::{Decider, FixedPlan};
use rolegate::design::{PalBudget, PalConfig, PalKind, PalReply};
use rolegate::gate::Access;
use rolegate::gate::CallContext;
use rolegate::lab::{DeciderSpec, LabConfig};
use rolegate::model::{FakeKind, LlmClient, LlmRequest, LlmResponse, ModelError, RequestedCall};
use rolegate::tools::{AddedArgs, Tool, ToolCall, ToolFailure};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::util::{env, lab_with};

/// Steps of the long run.
const STEPS: u32 = 12;

/// How the cancel arrives at step k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cancel {
    /// The model call cancels the token, then answers as usual.
    ThenAnswered,
    /// The model call cancels the token and never answers.
    NeverAnswers,
    /// The checkpoint hook at the top of step k cancels the token.
    FromHook,
}

/// A decider wrapper that cancels the run's token during its k-th call.
struct CancelAt {
    inner: Box<dyn Decider>,
    k: u32,
    calls: u32,
    token: CancellationToken,
    hang: bool,
}

impl Decider for CancelAt {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn is_free(&self) -> bool {
        self.inner.is_free()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.calls += 1;
        if self.calls != self.k {
            return self.inner.decide(state, request);
        }
        let token = self.token.clone();
        if self.hang {
            token.cancel();
            return Box::pin(std::future::pending());
        }
        // cancel while the call is being answered: the loop has already seen the call
        // start, so the answer arrives after the cancel
        let answer = self.inner.decide(state, request);
        Box::pin(async move {
            token.cancel();
            answer.await
        })
    }
}

/// A wandering model with room for `STEPS` distinct calls.
fn long_run() -> LabConfig {
    let mut cfg = LabConfig::fake(FakeKind::Wander);
    cfg.budget = RunBudget { max_steps: STEPS, max_cost: Decimal::ONE, ..RunBudget::default() };
    cfg.call_limits.insert("lookup_document".into(), 20);
    cfg.call_limits.insert("calculator".into(), 20);
    cfg
}

#[tokio::test]
async fn the_long_run_without_a_cancel_makes_a_call_at_every_step() {
    let mut lab = lab_with(long_run());
    let run = lab.agent.run("Find anything useful.", "run-1").await.unwrap();
    assert_eq!((run.reason(), run.calls().len(), run.state.step()), (StopReason::StepBudget, 12, 12));
}

#[tokio::test]
async fn a_cancel_at_any_step_ends_the_run_cancelled_and_no_tool_starts_after_it() {
    for how in [Cancel::ThenAnswered, Cancel::NeverAnswers, Cancel::FromHook] {
        for k in 1..=STEPS {
            let mut lab = lab_with(long_run());
            let token = lab.agent.cancel_token().clone();
            if how == Cancel::FromHook {
                let t = token.clone();
                lab.agent.add_step_hook(Box::new(move |state, _| {
                    if state.step() + 1 == k {
                        t.cancel();
                    }
                    Ok(())
                }));
            } else {
                let inner = lab.agent.replace_decider(Box::new(rolegate::agent::FixedPlan::default()));
                let hang = how == Cancel::NeverAnswers;
                lab.agent.replace_decider(Box::new(CancelAt { inner, k, calls: 0, token: token.clone(), hang }));
            }
            let run = lab.agent.run("Find anything useful.", "run-1").await.unwrap();
            let at = format!("{how:?} at step {k}");
            assert_eq!(run.reason(), StopReason::Cancelled, "{at}");
            assert_eq!(run.calls().len(), k as usize - 1, "{at}: calls {:?}", run.calls());
            assert_eq!(lab.agent.gate().audit().len(), k as usize - 1, "{at}: the gate saw a call after the cancel");
            let late: Vec<u32> =
                run.trace().lines.iter().filter(|l| l.kind == TraceKind::Tool && l.step >= k).map(|l| l.step).collect();
            assert!(late.is_empty(), "{at}: tool lines at steps {late:?}");
            let last = run.trace().lines.last().unwrap();
            assert_eq!((last.kind, last.code.as_ref()), (TraceKind::Stop, "cancelled"), "{at}");
        }
    }
}

/// A PolicyPal model that asks for one new document per reply (each lookup reaches the
/// gate and the tool) and cancels the run's token during its k-th reply, then answers it
/// or never answers.
struct PalCancelAt {
    k: u32,
    calls: u32,
    token: CancellationToken,
    hang: bool,
}

impl LlmClient for PalCancelAt {
    fn model(&self) -> &str {
        "fake-sensible"
    }

    fn complete<'a>(&'a mut self, _request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.calls += 1;
        let cancel_now = (self.calls == self.k).then(|| self.token.clone());
        if self.hang && cancel_now.is_some() {
            self.token.cancel();
            return Box::pin(std::future::pending());
        }
        let call = RequestedCall {
            id: format!("call-{}", self.calls),
            name: "lookup_document".into(),
            arguments: json!({ "doc_id": format!("kc-doc-{}", self.calls) }),
        };
        let reply =
            LlmResponse { text: String::new(), model: "fake-sensible".into(), usage: None, tool_calls: vec![call] };
        Box::pin(async move {
            if let Some(token) = cancel_now {
                token.cancel();
            }
            Ok(reply)
        })
    }
}

#[tokio::test]
async fn a_cancel_during_any_policypal_reply_runs_none_of_its_calls() {
    for (k, hang) in (1..=STEPS).flat_map(|k| [(k, false), (k, true)]) {
        let mut cfg = PalConfig::new(PalKind::Parallel);
        cfg.budget = PalBudget { max_steps: STEPS + 2, max_tokens: 1_000_000, max_stuck: 100, ..PalBudget::default() };
        let mut lab = cfg.build(&env());
        lab.pal.gate.set_policy(Arc::new(lab.pal.gate.policy().as_ref().clone().with_limit("lookup_document", 100)));
        let token = lab.pal.cancel.clone();
        lab.pal.client = Box::new(PalCancelAt { k, calls: 0, token, hang });
        let run = lab.pal.run("What do the policies say?", "run-1").await.unwrap();
        let at = format!("reply {k} (never answered: {hang})");
        assert_eq!(run.run.reason(), StopReason::Cancelled, "{at}");
        assert!(matches!(run.reply, PalReply::GaveUp { reason: StopReason::Cancelled, .. }), "{at}");
        assert_eq!(lab.pal.gate.audit().len(), k as usize - 1, "{at}: the gate saw a call of the cancelled reply");
        assert_eq!(run.run.calls().len(), k as usize - 1, "{at}");
    }
}

// ---------------------------------------------------------------- faulty tools

/// How a faulty tool behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Answers after this many seconds (of tokio time).
    AnswersAfter(u64),
    /// Never answers.
    Hangs,
    /// Panics while it is being awaited.
    PanicsLater,
    /// Panics as soon as it is called.
    PanicsAtOnce,
}

/// A tool added to the gate that behaves as `fault`, counting the calls that reach it.
#[derive(Debug)]
struct Faulty {
    name: &'static str,
    fault: Fault,
    calls: Arc<AtomicU32>,
}

impl Tool for Faulty {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        "Look a ticket up in a slow back office."
    }

    fn fields(&self) -> &'static [&'static str] {
        &["ticket_id"]
    }

    fn call(&self, _caller: &str, args: &AddedArgs) -> BoxFuture<'static, Result<Value, ToolFailure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let id = args.fields["ticket_id"].clone();
        match self.fault {
            Fault::PanicsAtOnce => panic!("faulty_lookup broke at once"),
            Fault::PanicsLater => Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                panic!("faulty_lookup broke while answering")
            }),
            Fault::Hangs => Box::pin(std::future::pending()),
            Fault::AnswersAfter(secs) => Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Ok(json!({"id": id, "status": "open", "source": "back office"}))
            }),
        }
    }
}

/// A triage lab whose gate holds `faulty_lookup` (listed in triage, read access) and a
/// plan that calls it, then reads T-601, then finishes.
fn faulty_lab(fault: Fault) -> (rolegate::lab::Lab, Arc<AtomicU32>) {
    let plan = FixedPlan::new(vec![
        ("faulty_lookup".into(), json!({"ticket_id": "T-601"})),
        ("get_ticket".into(), json!({"ticket_id": "T-601"})),
    ]);
    let cfg = LabConfig { decider: DeciderSpec::Fixed(plan), task: "triage".into(), ..LabConfig::default() };
    let mut lab = lab_with(cfg);
    let calls = Arc::new(AtomicU32::new(0));
    let tool = Arc::new(Faulty { name: "faulty_lookup", fault, calls: calls.clone() });
    let mut policy = lab.agent.gate().policy().as_ref().clone();
    policy.tasks.get_mut("triage").unwrap().insert("faulty_lookup".into());
    policy.access.insert("faulty_lookup".into(), Access::Read);
    lab.agent.gate_mut().set_policy(policy);
    lab.agent.gate_mut().add_tool(tool).unwrap();
    (lab, calls)
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_hangs_or_panics_is_a_named_failure_and_the_run_goes_on() {
    // fault → the code the gate gives the call, and how long the run waited for it
    let cases = [
        (Fault::AnswersAfter(10), "ok", 10),
        (Fault::AnswersAfter(31), "tool_timeout", 30),
        (Fault::Hangs, "tool_timeout", 30),
        (Fault::PanicsLater, "tool_panicked", 1),
        (Fault::PanicsAtOnce, "tool_panicked", 0),
    ];
    for (fault, code, waited) in cases {
        let (mut lab, calls) = faulty_lab(fault);
        assert_eq!(lab.agent.gate().call_timeout(), Duration::from_secs(30));
        let t0 = tokio::time::Instant::now();
        let run = lab.agent.run("Check T-601.", "run-1").await.unwrap();
        let at = format!("{fault:?}");
        assert_eq!(t0.elapsed(), Duration::from_secs(waited), "{at}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{at}: the tool was reached once, through the gate");
        let tools: Vec<(&str, &str)> = run
            .trace()
            .lines
            .iter()
            .filter(|l| l.kind == TraceKind::Tool)
            .map(|l| (l.detail(), l.code.as_ref()))
            .collect();
        assert_eq!(tools, [("faulty_lookup", code), ("get_ticket", "ok")], "{at}");
        let first = &run.state.observations()[0];
        assert_eq!(first.ok, code == "ok", "{at}");
        if code != "ok" {
            assert!(first.text.starts_with(&format!("error {code}: faulty_lookup ")), "{at}: {}", first.text);
        }
        let audit: Vec<&str> = lab.agent.gate().audit().iter().map(|e| e.outcome.as_str()).collect();
        assert_eq!(audit, [code, "ok"], "{at}: one audit event per call");
        assert_eq!(run.reason(), StopReason::Done, "{at}: the run ends with its own reason");
    }
}

#[tokio::test]
async fn an_added_tool_keeps_the_allowlist_the_argument_types_the_limits_and_never_writes() {
    let call = |args: Value| ToolCall::new("c1", "faulty_lookup", args);
    let ok = json!({"ticket_id": "T-601"});
    let (lab, calls) = faulty_lab(Fault::AnswersAfter(0));
    let mut gate = lab.agent.gate().clone();
    gate.set_policy(Arc::new(gate.policy().as_ref().clone().with_limit("faulty_lookup", 1)));
    // the allowlist: another task does not list it
    assert_eq!(gate.run_async(&call(ok.clone()), CallContext::new("reply", "r1", "kwame")).await.code(), "not_allowed");
    // typed arguments: exactly the declared string fields
    for bad in [json!({}), json!({"ticket_id": 601}), json!({"ticket_id": "T-601", "owner": "lena"}), json!(["T-601"])]
    {
        let outcome = gate.run_async(&call(bad.clone()), CallContext::new("triage", "r1", "kwame")).await;
        assert_eq!(outcome.code(), "invalid_arguments", "{bad}");
    }
    // the per-run limit counts it like any tool
    assert_eq!(gate.run_async(&call(ok.clone()), CallContext::new("triage", "r1", "kwame")).await.code(), "ok");
    assert_eq!(gate.run_async(&call(ok.clone()), CallContext::new("triage", "r1", "kwame")).await.code(), "call_limit");
    // without read access it is refused, even granted: an added tool never parks or writes
    let mut policy = gate.policy().as_ref().clone();
    policy.access.remove("faulty_lookup");
    gate.set_policy(policy.with_grant("faulty_lookup"));
    assert_eq!(
        gate.run_async(&call(ok.clone()), CallContext::new("triage", "r2", "kwame")).await.code(),
        "not_allowed"
    );
    assert!(gate.pending().is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the one allowed call reached the tool");
    // a caller that cannot wait gives a tool no time: the hang is a timeout at once
    let (lab, _) = faulty_lab(Fault::Hangs);
    let mut gate = lab.agent.gate().clone();
    assert_eq!(gate.run(&call(ok.clone()), CallContext::new("triage", "r1", "kwame")).code(), "tool_timeout");
    // a built-in tool cannot be replaced, nor an added one added twice
    for name in ["get_ticket", "send_email_draft", "faulty_lookup", "Bad Name"] {
        let other = Arc::new(Faulty { name, fault: Fault::Hangs, calls: Arc::new(AtomicU32::new(0)) });
        assert!(gate.clone().with_tool(other).is_err(), "{name}");
    }
    let spec = gate.spec("faulty_lookup").unwrap();
    assert_eq!((spec.name.as_ref(), &spec.parameters["required"]), ("faulty_lookup", &json!(["ticket_id"])));
}

#[tokio::test(start_paused = true)]
async fn a_call_its_caller_gave_up_on_is_still_audited_once() {
    let (lab, calls) = faulty_lab(Fault::Hangs);
    let mut gate = lab.agent.gate().clone();
    let call = ToolCall::new("c1", "faulty_lookup", json!({"ticket_id": "T-601"}));
    // the caller waits 1 s of the gate's 30, then drops the call
    let gave_up =
        tokio::time::timeout(Duration::from_secs(1), gate.run_async(&call, CallContext::new("triage", "r1", "kwame")))
            .await;
    assert!(gave_up.is_err());
    let audit: Vec<&str> = gate.audit().iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(audit, ["tool_abandoned"], "one audit event, even for a call nobody waited out");
    assert_eq!((calls.load(Ordering::SeqCst), gate.count("r1", "faulty_lookup")), (1, 1));
}
