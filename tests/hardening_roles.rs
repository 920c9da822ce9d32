//! Faults of the multi-agent actors: a role that panics at each stage of a run (before and
//! after it has sent a message) ends only its own run, `role_failed`, naming the role,
//! while runs beside it finish exactly as they would alone; a cancel at every model call
//! of a long three-round run ends it `cancelled` with no tool started after the cancel.

use rolegate::BoxFuture;
use rolegate::agent::Decider;
use rolegate::agent::{AgentState, TRACE_TARGET, TraceExport, TraceKind, TraceRecord};
use rolegate::cost::ManualClock;
use rolegate::model::{LlmClient, LlmRequest, LlmResponse, ModelError};
use rolegate::multi::{
    Behaviours, MultiBudget, MultiConfig, MultiReason, MultiRun, ReviewerKind, Role, RoleModels, start,
};
use rust_decimal::Decimal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt;

use crate::util::{SharedBuffer, menv};

const GOAL: &str = "Status of T-601 and our refund policy?";

/// Where a role's model breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Break {
    /// Its `n`th call panics.
    OnCall(u32),
    /// It panics when it is dropped, as its actor shuts down after the run.
    OnDrop,
}

/// A role's model with a hook run before each of its calls: the hook may panic, or ask
/// the call to hang (never answer); otherwise the fake answers. `on_drop`: panic with this
/// text when the model is dropped, as its actor shuts down after the run.
struct Hooked<T> {
    inner: T,
    hook: Box<dyn FnMut() -> bool + Send>,
    on_drop: Option<&'static str>,
}

impl<T> Drop for Hooked<T> {
    fn drop(&mut self) {
        if let Some(text) = self.on_drop
            && !std::thread::panicking()
        {
            panic!("{text}");
        }
    }
}

impl LlmClient for Hooked<Box<dyn LlmClient>> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn complete<'a>(&'a mut self, r: &'a LlmRequest) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        if (self.hook)() {
            return Box::pin(std::future::pending());
        }
        self.inner.complete(r)
    }
}

impl Decider for Hooked<Box<dyn Decider>> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn is_free(&self) -> bool {
        self.inner.is_free()
    }

    fn decide<'a>(
        &'a mut self,
        state: &'a AgentState,
        r: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ModelError>> {
        if (self.hook)() {
            return Box::pin(std::future::pending());
        }
        self.inner.decide(state, r)
    }
}

/// `inner`, breaking as `at` says with `text`.
fn breaks<T>(inner: T, at: Break, text: &'static str) -> Hooked<T> {
    let mut calls = 0;
    let hook = Box::new(move || {
        calls += 1;
        if at == Break::OnCall(calls) {
            panic!("{text}");
        }
        false
    });
    Hooked { inner, hook, on_drop: (at == Break::OnDrop).then_some(text) }
}

/// A stage of a run where a role breaks, and what the run must come to.
struct Stage {
    name: &'static str,
    role: Role,
    at: Break,
    /// The reviewer never approves, so there is a second round.
    two_rounds: bool,
    reason: MultiReason,
    /// Envelopes accepted before the run ended.
    messages: usize,
    /// Tool calls of the role that broke, over the whole run (before it broke).
    tools: &'static [&'static str],
}

/// Every stage, with its expectation: a round is brief (planner, 1 call), finding
/// (researcher: get_ticket, lookup_document, finish = 3 calls) and verdict (reviewer:
/// re-reads the cited document, then 1 call).
const STAGES: &[Stage] = &[
    Stage {
        name: "planner, before its brief",
        role: Role::Planner,
        at: Break::OnCall(1),
        two_rounds: false,
        reason: MultiReason::RoleFailed,
        messages: 0,
        tools: &[],
    },
    Stage {
        name: "researcher, step 1 of its loop",
        role: Role::Researcher,
        at: Break::OnCall(1),
        two_rounds: false,
        reason: MultiReason::RoleFailed,
        messages: 1,
        tools: &[],
    },
    Stage {
        name: "researcher, step 2, after its first read",
        role: Role::Researcher,
        at: Break::OnCall(2),
        two_rounds: false,
        reason: MultiReason::RoleFailed,
        messages: 1,
        tools: &["get_ticket"],
    },
    Stage {
        name: "researcher, step 3, about to send its finding",
        role: Role::Researcher,
        at: Break::OnCall(3),
        two_rounds: false,
        reason: MultiReason::RoleFailed,
        messages: 1,
        tools: &["get_ticket", "lookup_document"],
    },
    Stage {
        name: "reviewer, after its re-read, before its verdict",
        role: Role::Reviewer,
        at: Break::OnCall(1),
        two_rounds: false,
        reason: MultiReason::RoleFailed,
        messages: 2,
        tools: &["lookup_document"],
    },
    Stage {
        name: "planner, in round 2, after its first brief was sent",
        role: Role::Planner,
        at: Break::OnCall(2),
        two_rounds: true,
        reason: MultiReason::RoleFailed,
        messages: 3,
        tools: &[],
    },
    Stage {
        name: "researcher, in round 2, after its first finding was sent",
        role: Role::Researcher,
        at: Break::OnCall(4),
        two_rounds: true,
        reason: MultiReason::RoleFailed,
        messages: 4,
        tools: &["get_ticket", "lookup_document"],
    },
    Stage {
        name: "reviewer, in round 2, after its first verdict was sent",
        role: Role::Reviewer,
        at: Break::OnCall(2),
        two_rounds: true,
        reason: MultiReason::RoleFailed,
        messages: 5,
        tools: &["lookup_document", "lookup_document"],
    },
    Stage {
        name: "reviewer, shutting down after its approving verdict ended the run",
        role: Role::Reviewer,
        at: Break::OnDrop,
        two_rounds: false,
        reason: MultiReason::Done,
        messages: 3,
        tools: &["lookup_document"],
    },
];

fn config(two_rounds: bool) -> (MultiConfig, Behaviours) {
    let mut b = Behaviours::default();
    if two_rounds {
        b.reviewer = ReviewerKind::NeverApprove;
    }
    (MultiConfig::default(), b)
}

fn models(stage: Option<&Stage>, b: Behaviours) -> RoleModels {
    let mut m = RoleModels::fakes(b);
    let Some(s) = stage else { return m };
    let text = s.name;
    match s.role {
        Role::Planner => m.planner = Box::new(breaks(m.planner, s.at, text)),
        Role::Researcher => m.researcher = Box::new(breaks(m.researcher, s.at, text)),
        _ => m.reviewer = Box::new(breaks(m.reviewer, s.at, text)),
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_panics_at_any_stage_fails_only_its_own_run() {
    let env = menv();
    for stage in STAGES {
        let at = stage.name;
        let (cfg, b) = config(stage.two_rounds);
        let alone: MultiRun = rolegate::multi::run(&env, cfg.clone(), models(None, b), GOAL, "run-ok").await.unwrap();
        let beside: Vec<_> = (0..8)
            .map(|_| start(&env, cfg.clone(), models(None, b), GOAL, "run-ok", CancellationToken::new()).unwrap())
            .collect();
        let broken = start(&env, cfg.clone(), models(Some(stage), b), GOAL, "run-broken", CancellationToken::new());
        let run = broken.unwrap().finish().await.expect("the coordinator itself never fails");
        assert_eq!(run.reason, stage.reason, "{at}");
        assert_eq!(run.messages.len(), stage.messages, "{at}");
        assert_eq!(run.tools[&stage.role], stage.tools, "{at}");
        let audited: Vec<&str> = run.audit.iter().filter(|(r, _)| *r == stage.role).map(|(_, e)| e.tool()).collect();
        assert_eq!(audited, run.tools[&stage.role], "{at}: what its gate ran before the panic stays audited");
        assert_eq!(run.emails, 0, "{at}");
        let panicked = format!("panicked: {at}");
        let stops: Vec<(&str, &str)> = run.traces[0]
            .lines
            .iter()
            .filter(|l| l.kind == TraceKind::Stop)
            .map(|l| (l.code.as_ref(), l.detail()))
            .collect();
        match stage.reason {
            MultiReason::RoleFailed => {
                let failed = run.failed.as_ref().expect("the failed role is named");
                assert_eq!((failed.role, failed.detail.as_str()), (stage.role, panicked.as_str()), "{at}");
                assert_eq!(stops, [("role_failed", "")], "{at}");
            }
            _ => {
                // the run had its answer; the crash afterwards is on record, not hidden
                assert!(run.failed.is_none(), "{at}");
                assert_eq!(stops.len(), 2, "{at}: {stops:?}");
                assert_eq!(stops[0].0, stage.reason.as_str(), "{at}");
                assert_eq!(stops[1].0, "role_failed", "{at}");
                assert!(stops[1].1.starts_with(&format!("{}: panicked: ", stage.role)), "{at}: {stops:?}");
            }
        }
        for h in beside {
            let other = h.finish().await.unwrap();
            assert!(other == alone, "{at}: a run beside the broken one differs from the same run alone");
        }
    }
}

// ---------------------------------------------------------------- cancellation

/// `inner`, counting every model call of the run in `seen` (all roles share it) and
/// cancelling `token` during call `k`, then answering it, or never answering (`hang`).
fn cancel_at<T>(inner: T, seen: &Arc<AtomicU32>, k: u32, hang: bool, token: &CancellationToken) -> Hooked<T> {
    let (seen, token) = (seen.clone(), token.clone());
    let hook = Box::new(move || {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        if n == k {
            token.cancel();
            return hang;
        }
        false
    });
    Hooked { inner, hook, on_drop: None }
}

/// Three rounds (the reviewer never approves): 15 model calls, 9 tool calls.
fn long_config() -> MultiConfig {
    let budget = MultiBudget {
        max_rounds: 3,
        max_messages: 12,
        max_role_calls: 20,
        max_cost: Decimal::ONE,
        ..MultiBudget::default()
    };
    MultiConfig { budget, ..MultiConfig::default() }
}

/// Runs the long run with a cancel at model call `k` (none for 0), on one thread, and
/// returns the run, the model calls made and every trace record in the order written.
fn long_run(k: u32, hang: bool) -> (MultiRun, u32, Vec<TraceRecord>) {
    let buffer = SharedBuffer::default();
    let (export, layer) = TraceExport::new(buffer.clone(), ManualClock::new().shared());
    let subscriber = tracing_subscriber::registry().with(layer);
    let seen = Arc::new(AtomicU32::new(0));
    let token = CancellationToken::new();
    let b = Behaviours { reviewer: ReviewerKind::NeverApprove, ..Behaviours::default() };
    let m = RoleModels::fakes(b);
    let (s, t) = (&seen, &token);
    let models = RoleModels {
        planner: Box::new(cancel_at(m.planner, s, k, hang, t)),
        researcher: Box::new(cancel_at(m.researcher, s, k, hang, t)),
        reviewer: Box::new(cancel_at(m.reviewer, s, k, hang, t)),
    };
    let run = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let handle = start(&menv(), long_config(), models, GOAL, "run-long", token.clone()).unwrap();
            handle.finish().await.unwrap()
        })
    });
    export.finish().unwrap();
    let records = buffer.records();
    (run, seen.load(Ordering::SeqCst), records)
}

/// The tool lines of `records` as role, tool and code.
fn tools(records: &[TraceRecord]) -> Vec<(String, String, String)> {
    let role = |r: &TraceRecord| r.role.clone().unwrap_or_default();
    records
        .iter()
        .filter(|r| r.kind == TraceKind::Tool.as_str())
        .map(|r| (role(r), r.detail.clone(), r.code.clone()))
        .collect()
}

#[test]
fn a_cancel_at_any_model_call_of_a_long_multi_agent_run_ends_it_and_starts_no_tool_after_it() {
    // tracing's dispatchers are process-global state: this test reads the order of every
    // trace line of a run, so it runs alone, in a process of its own
    if !crate::util::in_own_process(
        "hardening_roles::a_cancel_at_any_model_call_of_a_long_multi_agent_run_ends_it_and_starts_no_tool_after_it",
    ) {
        return;
    }
    assert_eq!(TRACE_TARGET, "rolegate::trace");
    let (full, calls, records) = long_run(0, false);
    assert_eq!((full.reason, full.rounds, full.messages.len()), (MultiReason::RoundLimit, 3, 9));
    assert_eq!(calls, 15, "3 rounds of planner 1, researcher 3, reviewer 1");
    let all_tools = tools(&records);
    assert_eq!(all_tools.len(), 9, "3 rounds of get_ticket, lookup_document and the reviewer's re-read");
    // the tool lines written before the k-th model line of the uncancelled run
    let models: Vec<usize> =
        records.iter().enumerate().filter(|(_, r)| r.kind == TraceKind::Model.as_str()).map(|(i, _)| i).collect();
    assert_eq!(models.len(), 15);
    for hang in [false, true] {
        for k in 1..=calls {
            let at = format!("cancel at model call {k} (never answered: {hang})");
            let (run, _, records) = long_run(k, hang);
            assert_eq!(run.reason, MultiReason::Cancelled, "{at}");
            let before = tools(&records[..models[k as usize - 1]]);
            assert_eq!(tools(&records), before, "{at}: exactly the tools started before the cancel");
            let audited = run.audit.len();
            assert_eq!(audited, before.len(), "{at}: the gates saw nothing more");
            assert!(full.messages.starts_with(&run.messages), "{at}: messages are a prefix of the full run's");
            assert_eq!(run.emails, 0, "{at}");
            let last = run.traces[0].lines.last().unwrap();
            assert_eq!((last.kind, last.code.as_ref()), (TraceKind::Stop, "cancelled"), "{at}");
        }
    }
}
