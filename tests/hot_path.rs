//! The hot path's shared data (issue 18): a tool's schema is one value that every request
//! showing the tool shares, and what a model is shown of it is the same as before.

use rolegate::gate::GateOutcome;
use rolegate::tools::{Registry, TOOL_NAMES};
use serde_json::json;
use std::sync::Arc;

#[test]
fn every_request_shares_one_schema_per_tool_and_serialises_it_whole() {
    for name in TOOL_NAMES {
        let (a, b) = (Registry.spec(name).unwrap(), Registry.spec(name).unwrap());
        assert!(Arc::ptr_eq(&a.parameters, &b.parameters), "{name}: the schema was copied");
        let shown = serde_json::to_value(&a).unwrap();
        assert_eq!(shown["parameters"], *a.parameters, "{name}");
        assert_eq!(shown["parameters"]["type"], "object", "{name}");
        assert_eq!(shown["name"], name);
    }
}

#[test]
fn an_observation_is_the_compact_json_text_of_the_result() {
    let data =
        json!({"id": "T-601", "text": "ünïcode \"quoted\" <b>&</b>\n\u{1F600}", "n": [1, 2.5, -3], "none": null});
    let outcome = GateOutcome::Ok(data.clone().into());
    let (ok, text) = outcome.observation();
    assert!(ok);
    assert_eq!(text, data.to_string());
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), data);
}

// ---- fakes that answer at once, against the same fakes awaited ----

use rolegate::BoxFuture;
use rolegate::agent::{AgentState, Decider, ModelDecider};
use rolegate::eval::{bundled_multi, run_multi_with};
use rolegate::model::{FakeKind, FakeModel, LlmClient, LlmRequest, LlmResponse, ModelError};
use rolegate::multi::RoleModels;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A future that is pending on its first two polls (waking its waker each time), so
/// whoever awaits it cannot take its answer at once: it goes through the race.
struct Later<F> {
    inner: F,
    pending: u8,
}

impl<F: Future + Unpin> Future for Later<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.pending > 0 {
            self.pending -= 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll(cx)
    }
}

fn later<'a, T: 'a>(inner: BoxFuture<'a, T>) -> BoxFuture<'a, T> {
    Box::pin(Later { inner, pending: 2 })
}

/// True when `future` is ready on its first poll.
fn ready_at_once<T>(mut future: BoxFuture<'_, T>) -> bool {
    future.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_ready()
}

/// A client whose every answer comes only after the caller has awaited it.
struct Awaited(Box<dyn LlmClient>);

impl LlmClient for Awaited {
    fn model(&self) -> &str {
        self.0.model()
    }

    fn model_name(&self) -> Cow<'static, str> {
        self.0.model_name()
    }

    fn complete<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        later(self.0.complete(request))
    }

    fn complete_message<'a>(&'a mut self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        later(self.0.complete_message(request))
    }
}

/// The same for a decider.
struct AwaitedDecider(Box<dyn Decider>);

impl Decider for AwaitedDecider {
    fn model(&self) -> &str {
        self.0.model()
    }

    fn model_name(&self) -> Cow<'static, str> {
        self.0.model_name()
    }

    fn is_free(&self) -> bool {
        self.0.is_free()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        later(self.0.decide(state, request))
    }
}

#[tokio::test]
async fn every_multi_row_runs_alike_with_its_fakes_answering_at_once_or_awaited() {
    let env = crate::util::menv();
    let mut compared = 0;
    for row in bundled_multi().unwrap() {
        if row.compromised.researcher.is_some()
            || row.compromised.planner.is_some()
            || row.compromised.reviewer.is_some()
        {
            continue;
        }
        let mut fakes = RoleModels::fakes(row.roles);
        let request = LlmRequest { model: "x".into(), messages: vec![], tools: vec![], max_tokens: 1 };
        // the bundled fakes do answer at once (else this test compares nothing)
        assert!(ready_at_once(fakes.planner.complete_message(&request)), "{}", row.id);
        assert!(ready_at_once(fakes.reviewer.complete_message(&request)), "{}", row.id);
        let (now, now_outcome) = run_multi_with(&row, &env, RoleModels::fakes(row.roles)).await.unwrap();
        let f = RoleModels::fakes(row.roles);
        let awaited = RoleModels {
            planner: Box::new(Awaited(f.planner)),
            researcher: Box::new(AwaitedDecider(f.researcher)),
            reviewer: Box::new(Awaited(f.reviewer)),
        };
        let (then, then_outcome) = run_multi_with(&row, &env, awaited).await.unwrap();
        assert_eq!(now_outcome, then_outcome, "{}", row.id);
        assert_eq!(now.messages, then.messages, "{}", row.id);
        assert_eq!(now.usage, then.usage, "{}", row.id);
        assert_eq!(now.audit, then.audit, "{}", row.id);
        let lines = |r: &rolegate::multi::MultiRun| r.traces.iter().map(|t| t.lines()).collect::<Vec<_>>();
        assert_eq!(lines(&now), lines(&then), "{}", row.id);
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} rows run on plain fakes");
}

#[tokio::test]
async fn every_fake_kind_runs_alike_answering_at_once_or_awaited() {
    for name in ["sensible", "hallucinate", "garbage", "early_finish", "obey", "loop", "wander"] {
        let kind: FakeKind = name.parse().unwrap();
        let request = LlmRequest { model: "x".into(), messages: vec![], tools: vec![], max_tokens: 1 };
        assert!(ready_at_once(FakeModel::new(kind).complete(&request)), "{name}");
        let mut now = crate::util::lab(kind);
        let mut then = crate::util::lab(kind);
        then.agent.replace_decider(Box::new(AwaitedDecider(Box::new(ModelDecider::new(FakeModel::new(kind))))));
        let a = now.agent.run("Status of T-601 and our refund policy?", "run-1").await.unwrap();
        let b = then.agent.run("Status of T-601 and our refund policy?", "run-1").await.unwrap();
        assert_eq!(a.state, b.state, "{name}");
        assert_eq!(a.progress.trace.lines(), b.progress.trace.lines(), "{name}");
        assert_eq!(a.calls(), b.calls(), "{name}");
        assert_eq!(a.progress.ledger, b.progress.ledger, "{name}");
    }
}

/// A decider that answers at once, counting how often it was asked.
struct Counted {
    inner: ModelDecider,
    asked: Arc<std::sync::atomic::AtomicU32>,
}

impl Decider for Counted {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        request: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.decide(state, request)
    }
}

#[tokio::test]
async fn a_run_cancelled_after_its_step_began_asks_its_decider_nothing_more() {
    use rolegate::agent::StopReason;
    use std::sync::atomic::{AtomicU32, Ordering};
    for k in 1..=3u32 {
        let mut lab = crate::util::lab(FakeKind::Sensible);
        let asked = Arc::new(AtomicU32::new(0));
        let inner = ModelDecider::new(FakeModel::new(FakeKind::Sensible));
        lab.agent.replace_decider(Box::new(Counted { inner, asked: asked.clone() }));
        // the hook runs after the step's first read of the token: the cancel it makes is
        // seen only by the read before the model is asked
        let token = lab.agent.cancel_token().clone();
        lab.agent.add_step_hook(Box::new(move |state, _| {
            if state.step() + 1 == k {
                token.cancel();
            }
            Ok(())
        }));
        let run = lab.agent.run("Status of T-601 and our refund policy?", "run-1").await.unwrap();
        assert_eq!(run.reason(), StopReason::Cancelled, "cancel at step {k}");
        assert_eq!(asked.load(Ordering::SeqCst), k - 1, "cancel at step {k}: asked once a step before it");
        assert_eq!(run.calls().len(), k as usize - 1, "cancel at step {k}");
    }
}
