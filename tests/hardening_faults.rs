//! Faults that exist today: cancellation at every step index of a long run, from inside a
//! model call (answered or never answered) and from a checkpoint hook, for the
//! single-agent loop and the PolicyPal loop. Each run ends `cancelled` and no tool starts
//! after the cancel.

use rolegate::agent::{AgentState, RunBudget, StopReason, TraceKind};
use rolegate::design::{PalBudget, PalConfig, PalKind, PalReply};
use rolegate::eval::LabConfig;
use rolegate::model::{BoxFuture, Decider, FakeKind, LlmClient, LlmRequest, LlmResponse, ModelError, RequestedCall};
use rust_decimal::Decimal;
use serde_json::json;
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
            let token = lab.agent.cancel.clone();
            if how == Cancel::FromHook {
                let t = token.clone();
                lab.agent.on_step.push(Box::new(move |state, _| {
                    if state.step() + 1 == k {
                        t.cancel();
                    }
                    Ok(())
                }));
            } else {
                let inner = std::mem::replace(&mut lab.agent.decider, Box::new(rolegate::model::FixedPlan::default()));
                let hang = how == Cancel::NeverAnswers;
                lab.agent.decider = Box::new(CancelAt { inner, k, calls: 0, token: token.clone(), hang });
            }
            let run = lab.agent.run("Find anything useful.", "run-1").await.unwrap();
            let at = format!("{how:?} at step {k}");
            assert_eq!(run.reason(), StopReason::Cancelled, "{at}");
            assert_eq!(run.calls().len(), k as usize - 1, "{at}: calls {:?}", run.calls());
            assert_eq!(lab.agent.gate.audit.len(), k as usize - 1, "{at}: the gate saw a call after the cancel");
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
        lab.pal.gate.policy = lab.pal.gate.policy.clone().with_limit("lookup_document", 100);
        let token = lab.pal.cancel.clone();
        lab.pal.client = Box::new(PalCancelAt { k, calls: 0, token, hang });
        let run = lab.pal.run("What do the policies say?", "run-1").await.unwrap();
        let at = format!("reply {k} (never answered: {hang})");
        assert_eq!(run.run.reason(), StopReason::Cancelled, "{at}");
        assert!(matches!(run.reply, PalReply::GaveUp { reason: StopReason::Cancelled, .. }), "{at}");
        assert_eq!(lab.pal.gate.audit.len(), k as usize - 1, "{at}: the gate saw a call of the cancelled reply");
        assert_eq!(run.run.calls().len(), k as usize - 1, "{at}");
    }
}
