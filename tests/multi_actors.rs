//! The actors under stress: cancellation, wall time on paused tokio time, a role that
//! panics among a hundred healthy runs, a thousand runs in flight, budgets that count
//! refused messages.

use rolegate::BoxFuture;
use rolegate::agent::Decider;
use rolegate::agent::{AgentState, TraceKind};
use rolegate::eval::{MultiRow, bundled_multi};
use rolegate::model::{LlmClient, LlmRequest, LlmResponse, ModelError};
use rolegate::multi::{
    Behaviours, MultiBudget, MultiConfig, MultiReason, MultiRun, OnReject, PlannerKind, RejectCode, Role, RoleModels,
    start,
};
use rolegate::multi::{FakeResearcher, FakeReviewer};
use rust_decimal::Decimal;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::util::{m01, menv};

const GOAL: &str = "Status of T-601 and our refund policy?";

/// A researcher that cancels the run during its second decision, then proposes a read.
struct CancelsAtStep2 {
    inner: FakeResearcher,
    run: CancellationToken,
}

impl Decider for CancelsAtStep2 {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        r: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        if state.step() == 2 {
            self.run.cancel();
        }
        self.inner.decide(state, r)
    }
}

#[tokio::test]
async fn cancellation_mid_run_ends_cancelled_within_the_step_and_no_tool_starts_after_it() {
    let env = menv();
    let token = CancellationToken::new();
    let mut models = RoleModels::fakes(Behaviours::default());
    models.researcher = Box::new(CancelsAtStep2 { inner: FakeResearcher::default(), run: token.clone() });
    let run = start(&env, MultiConfig::default(), models, GOAL, "run-cancel", token).unwrap().finish().await.unwrap();
    assert_eq!(run.reason, MultiReason::Cancelled);
    assert_eq!(run.messages.len(), 1, "only the brief was accepted");
    // the second step proposed lookup_document; cancellation was seen before the gate
    assert_eq!(run.tools[&Role::Researcher], ["get_ticket"]);
    let audited: Vec<(Role, &str)> = run.audit.iter().map(|(r, e)| (*r, e.tool())).collect();
    assert_eq!(audited, [(Role::Researcher, "get_ticket")]);
    let researcher = &run.traces[2];
    let last = researcher.lines.last().unwrap();
    assert_eq!((last.step, last.kind, last.code.as_ref()), (2, TraceKind::Stop, "cancelled"));
    assert!(run.traces[3].lines.is_empty(), "the reviewer was never asked");
}

/// A reviewer whose model never answers; it says when it has been asked.
struct Hangs {
    asked: Arc<Notify>,
}

impl LlmClient for Hangs {
    fn model(&self) -> &str {
        "fake-reviewer"
    }

    fn complete<'a>(&'a mut self, _: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn cancelling_from_outside_abandons_a_model_call_in_flight() {
    let env = menv();
    let asked = Arc::new(Notify::new());
    let mut models = RoleModels::fakes(Behaviours::default());
    models.reviewer = Box::new(Hangs { asked: asked.clone() });
    let handle = start(&env, MultiConfig::default(), models, GOAL, "run-hang", CancellationToken::new()).unwrap();
    asked.notified().await;
    handle.cancel();
    let run = handle.finish().await.unwrap();
    assert_eq!(run.reason, MultiReason::Cancelled);
    assert_eq!(run.messages.len(), 2);
    let reviewer: Vec<&str> = run.traces[3].lines.iter().map(|l| l.code.as_ref()).collect();
    assert_eq!(reviewer, ["ok", "cancelled"], "the lookup ran, the model call was abandoned");
}

/// A reviewer whose model takes `secs` of (tokio) time, then answers sensibly.
struct Slow {
    secs: u64,
}

impl LlmClient for Slow {
    fn model(&self) -> &str {
        "fake-reviewer"
    }

    fn complete<'a>(&'a mut self, r: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        let secs = self.secs;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            FakeReviewer::default().complete(r).await
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_wall_time_budget_stops_a_slow_role_at_the_deadline() {
    let env = menv();
    let budget = MultiBudget { max_seconds: Duration::from_secs(10), ..MultiBudget::default() };
    let cfg = MultiConfig { budget, ..MultiConfig::default() };
    let mut models = RoleModels::fakes(Behaviours::default());
    models.reviewer = Box::new(Slow { secs: 30 });
    let t0 = tokio::time::Instant::now();
    let run = rolegate::multi::run(&env, cfg.clone(), models, GOAL, "run-slow").await.unwrap();
    assert_eq!(run.reason, MultiReason::TimeBudget);
    assert_eq!(run.messages.len(), 2);
    assert_eq!(t0.elapsed(), Duration::from_secs(10), "stopped at the deadline, not when the model answered");
    // the same reviewer within budget: done, 30 s of paused time later
    let mut models = RoleModels::fakes(Behaviours::default());
    models.reviewer = Box::new(Slow { secs: 30 });
    let roomy = MultiConfig { budget: MultiBudget { max_seconds: Duration::from_secs(60), ..cfg.budget }, ..cfg };
    let run = rolegate::multi::run(&env, roomy, models, GOAL, "run-slow").await.unwrap();
    assert_eq!(run.reason, MultiReason::Done);
}

/// A reviewer whose model panics.
struct Panics;

impl LlmClient for Panics {
    fn model(&self) -> &str {
        "fake-reviewer"
    }

    fn complete<'a>(&'a mut self, _: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        panic!("reviewer model blew up")
    }
}

fn launch(row: &MultiRow, run_id: &str) -> rolegate::multi::MultiHandle {
    start(&menv(), row.config(), RoleModels::fakes(row.roles), &row.goal, run_id, CancellationToken::new()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_panics_ends_only_its_own_run_while_a_hundred_others_finish() {
    let env = menv();
    let row = m01();
    let healthy: Vec<_> = (0..100).map(|i| launch(&row, &format!("run-ok-{i}"))).collect();
    let mut models = RoleModels::fakes(row.roles);
    models.reviewer = Box::new(Panics);
    let broken = start(&env, row.config(), models, &row.goal, "run-broken", CancellationToken::new()).unwrap();
    let run = broken.finish().await.unwrap();
    assert_eq!(run.reason, MultiReason::RoleFailed);
    let failed = run.failed.as_ref().unwrap();
    assert_eq!(failed.role, Role::Reviewer);
    assert!(failed.detail.contains("panicked: reviewer model blew up"), "{}", failed.detail);
    assert_eq!(run.messages.len(), 2, "brief and finding were accepted before the reviewer failed");
    for h in healthy {
        let r = h.finish().await.unwrap();
        assert_eq!((r.reason, r.messages.len(), r.emails), (MultiReason::Done, 3, 0), "{}", r.run_id);
    }
}

/// A researcher whose model process dies.
struct Crashes;

impl Decider for Crashes {
    fn model(&self) -> &str {
        "fake-researcher"
    }

    fn decide<'a>(
        &'a mut self,
        _: &'a AgentState,
        _: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::ready(Err(ModelError::Crashed("killed".into()))))
    }
}

/// A researcher that answers prose.
struct Prose;

impl Decider for Prose {
    fn model(&self) -> &str {
        "fake-researcher"
    }

    fn decide<'a>(
        &'a mut self,
        _: &'a AgentState,
        _: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::ready(Ok(LlmResponse::text("I looked, it is fine.", "fake-researcher"))))
    }
}

#[tokio::test]
async fn a_crashed_model_fails_its_role_and_a_stuck_loop_stops_it() {
    let env = menv();
    let mut models = RoleModels::fakes(Behaviours::default());
    models.researcher = Box::new(Crashes);
    let run = rolegate::multi::run(&env, MultiConfig::default(), models, GOAL, "run-crash").await.unwrap();
    assert_eq!(run.reason, MultiReason::RoleFailed);
    assert_eq!(run.failed.unwrap().role, Role::Researcher);
    let mut models = RoleModels::fakes(Behaviours::default());
    models.researcher = Box::new(Prose);
    let run = rolegate::multi::run(&env, MultiConfig::default(), models, GOAL, "run-prose").await.unwrap();
    assert_eq!(run.reason, MultiReason::RoleStopped);
    let coordinator: Vec<String> = run.traces[0].lines();
    assert!(
        coordinator.iter().any(|l| l.contains("role_stopped") && l.contains("researcher: stuck")),
        "{coordinator:?}"
    );
}

/// Every row's run, compared on everything it records.
fn same(a: &MultiRun, b: &MultiRun) -> bool {
    a == b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_runs_in_flight_give_exactly_the_outcomes_of_one_at_a_time() {
    let env = menv();
    let rows = bundled_multi().unwrap();
    let mut alone = Vec::new();
    for row in &rows {
        let run_id = row.run_id();
        let run = rolegate::multi::run(&env, row.config(), RoleModels::fakes(row.roles), &row.goal, &run_id);
        alone.push(run.await.unwrap());
    }
    let handles: Vec<_> = (0..1000).map(|i| launch(&rows[i % rows.len()], &rows[i % rows.len()].run_id())).collect();
    for (i, h) in handles.into_iter().enumerate() {
        let run = h.finish().await.unwrap();
        assert!(same(&run, &alone[i % rows.len()]), "run {i} ({}) differs", rows[i % rows.len()].id);
    }
}

#[tokio::test]
async fn refused_messages_count_against_the_message_budget_when_the_run_retries() {
    let env = menv();
    let budget = MultiBudget { max_messages: 5, ..MultiBudget::default() };
    let cfg = MultiConfig { on_reject: OnReject::Retry, budget, ..MultiConfig::default() };
    let b = Behaviours { planner: PlannerKind::Grant, ..Behaviours::default() };
    let run = rolegate::multi::run(&env, cfg, RoleModels::fakes(b), GOAL, "run-retry").await.unwrap();
    assert_eq!(run.reason, MultiReason::MessageLimit);
    assert_eq!(run.messages.len(), 0);
    assert_eq!(run.rejected_codes(), vec![RejectCode::InvalidMessage; 5]);
    assert_eq!(run.role_calls, 5, "each retry was a planner call");
}

#[tokio::test]
async fn the_cost_budget_is_checked_against_the_worst_case_before_a_call() {
    let env = menv();
    let budget = MultiBudget { max_cost: Decimal::new(1, 4), ..MultiBudget::default() };
    let cfg = MultiConfig { budget, ..MultiConfig::default() };
    let run =
        rolegate::multi::run(&env, cfg, RoleModels::fakes(Behaviours::default()), GOAL, "run-cost").await.unwrap();
    assert_eq!((run.reason, run.role_calls, run.cost), (MultiReason::CostBudget, 0, Decimal::ZERO));
    let enough = MultiBudget { max_cost: Decimal::new(10, 3), ..MultiBudget::default() };
    let cfg = MultiConfig { budget: enough, ..MultiConfig::default() };
    let run =
        rolegate::multi::run(&env, cfg, RoleModels::fakes(Behaviours::default()), GOAL, "run-cost").await.unwrap();
    assert_eq!(run.reason, MultiReason::CostBudget, "the spend so far leaves no room for the reviewer");
    assert!(run.cost <= Decimal::new(10, 3), "{}", run.cost);
}

/// A planner whose model never answers; it says when the role actor dropped it.
struct NeverAnswers {
    dropped: Arc<Notify>,
}

impl LlmClient for NeverAnswers {
    fn model(&self) -> &str {
        "fake-sensible"
    }

    fn complete<'a>(&'a mut self, _: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        Box::pin(std::future::pending())
    }
}

impl Drop for NeverAnswers {
    fn drop(&mut self) {
        self.dropped.notify_one();
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_of_a_running_run_cancels_it_and_its_roles_stop() {
    let env = menv();
    let dropped = Arc::new(Notify::new());
    let mut models = RoleModels::fakes(Behaviours::default());
    models.planner = Box::new(NeverAnswers { dropped: dropped.clone() });
    let token = CancellationToken::new();
    let handle = start(&env, MultiConfig::default(), models, GOAL, "run-dropped", token.clone()).unwrap();
    tokio::task::yield_now().await;
    assert!(!token.is_cancelled(), "running, waiting on its planner");
    drop(handle);
    assert!(token.is_cancelled(), "the drop guard cancelled the run");
    // the coordinator ends the run and joins its roles: the planner's model is dropped
    tokio::time::timeout(Duration::from_secs(5), dropped.notified()).await.expect("the planner actor stopped");
    let token = CancellationToken::new();
    // finishing consumes the handle; its guard has nothing left to do
    let handle =
        start(&env, MultiConfig::default(), RoleModels::fakes(Behaviours::default()), GOAL, "run-done", token).unwrap();
    assert_eq!(handle.finish().await.unwrap().reason, MultiReason::Done);
}

/// A finding rests on what the researcher itself cited: its finish names its own
/// observations (checked by the state rules: successful reads of this run), and a finding
/// source is accepted only when one of those cited reads read it. A record the run read but
/// did not cite, or cited by a finish of some other run, backs nothing (issue 31, item 8).
#[tokio::test]
async fn a_finding_may_cite_only_records_its_own_finish_cited() {
    use rolegate::agent::ModelDecider;
    use rolegate::model::ScriptedModel;
    let both = "T-601 status is open; kc-returns-v3 is titled Returns and refunds (v3)";
    let finding =
        |sources: &[&str]| serde_json::json!({"kind": "finding", "claim": both, "sources": sources}).to_string();
    let script = |finding: String, cited: &[&str]| {
        ScriptedModel::new(vec![
            r#"{"action":"call","tool":"get_ticket","arguments":{"ticket_id":"T-601"}}"#.into(),
            r#"{"action":"call","tool":"lookup_document","arguments":{"doc_id":"kc-returns-v3"}}"#.into(),
            serde_json::json!({"action": "finish", "answer": finding, "sources": cited}).to_string(),
        ])
    };
    let sources = ["T-601", "kc-returns-v3"];
    for (cited, want) in [
        (&["o1", "o2"][..], Ok(())),
        // the document was read in this run, but the finish did not cite that read
        (&["o1"][..], Err(RejectCode::UnknownSource)),
        (&["o2"][..], Err(RejectCode::UnknownSource)),
    ] {
        let mut models = RoleModels::fakes(Behaviours::default());
        models.researcher = Box::new(ModelDecider::new(script(finding(&sources), cited)));
        let run = rolegate::multi::run(&menv(), MultiConfig::default(), models, GOAL, "run-cited").await.unwrap();
        let codes: Vec<RejectCode> = run.rejected.iter().map(|r| r.code).collect();
        match want {
            Ok(()) => assert!(codes.is_empty() && run.reason == MultiReason::Done, "{cited:?}: {codes:?}"),
            Err(code) => assert_eq!(codes, [code], "{cited:?}"),
        }
    }
}
