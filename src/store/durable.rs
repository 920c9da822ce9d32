//! Durable runs: every step committed before the next (`--durability step`), `resume` after
//! a crash, and the list of runs.
//!
//! A durable run is recorded first (its spec, with design and goal, in its own
//! transaction); then every step goes through the store's [`StepWriter`] (group commit)
//! and the run awaits each commit; its end (the last checkpoint, parked actions, the
//! request, the remaining audit, the mail sent, and an `end` record with what the run came
//! to) is one more transaction. A process that dies in between leaves a run without an
//! `end` record: `rolegate runs list` shows it `interrupted`, and [`Desk::resume`]
//! continues it:
//!
//! - the single loop, fixed and plan continue from their latest checkpoint through
//!   [`Agent::drive`](crate::agent::Agent::drive) (plan: with the checked plan from its
//!   durable `plan` record, so the planner is not asked again);
//! - PolicyPal and the three roles are carried out again from their spec, and every step
//!   already durable must come out the same (the same hand-off envelope, the same step and
//!   status): their steps only read (a PolicyPal side effect parks on a card, no role holds
//!   a write tool), so nothing runs twice that has an effect; a step that comes out
//!   differently stops the resume with [`DeskError::Diverged`].
//!
//! A parked action is written only with the run's end, in the same transaction as the
//! checkpoint that waits on it, so a crash between the gate parking it and that commit
//! leaves nothing parked: the resumed run parks it once.
//!
//! A run on a real model (`openai:NAME`, per role for the three roles) keeps in its spec how
//! to reach the server again, never the key ([`HttpSpec`](super::HttpSpec)); every model
//! exchange is committed through the same writer before its answer is used
//! (`exchanges.rs`), and a carried-on run answers the exchanges it made already from the
//! store, so re-executing PolicyPal or the three roles reproduces their durable steps
//! exactly and the server is never asked the same thing twice.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::desk::{Desk, DeskError, RunSpec, queue_from, save_queue, sinks_ok, with_outbox};
use super::durable_http::{RebuildError, Rebuilt};
use super::exchanges::{RunExchanges, exchange_count};
use super::journal::{StepRecord, StepWriter, push_step, run_summary, sign_step, steps_of};
use super::{StoreError, rows};
use crate::agent::{AgentState, Durable, FixedPlan, Progress, StepSink, Trace};
use crate::cost::Ledger;
use crate::design::{
    Design, DesignConfig, DesignOutcome, PLAN_STEP, PlanFake, PlanFakeKind, PlanRecord, plan_then_execute, run_design,
};
use crate::future::BoxFuture;
use crate::gate::AuditEvent;
use crate::human::{ApprovalRequest, Checkpoint, resume_run};
use crate::lab::DeciderSpec;
use crate::model::LlmClient;
use crate::model::http::{Exchanges, HttpClient};
use crate::multi::{Behaviours, ClaimMode, RoleSetup};

/// The journal kind of a run's end.
pub const END_STEP: &str = "end";

/// When a run's steps are made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Every step is committed before the next one starts (the default with a store).
    #[default]
    Step,
    /// The run is written once, when the command ends (a crash loses the run).
    Exit,
}

/// What a durable run is, beyond [`RunSpec`]'s model, user, task and grants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableSpec {
    /// `single`, `fixed`, `plan`, `policypal` or `multi`.
    pub design: String,
    /// The goal.
    pub goal: String,
    /// The fake of plan (a planner kind) or PolicyPal (a PolicyPal kind).
    #[serde(default)]
    pub fake: String,
    /// The three roles' fake behaviours.
    #[serde(default)]
    pub roles: Behaviours,
    /// The three roles' claim mode.
    #[serde(default)]
    pub claims: ClaimMode,
    /// A run on a real model: how to reach it again (never the key). Absent for fakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<super::durable_http::HttpSpec>,
}

/// What a run's `end` record holds: how it ended and the lines it printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndRecord {
    /// The outcome code (`done`, `needs_approval`, a stop reason, …).
    pub code: String,
    /// What the run printed: its trace and outcome lines.
    pub lines: Vec<String>,
    /// The request filed for it, when it parked.
    #[serde(default)]
    pub request: Option<String>,
}

/// A durable run carried to its end (now, or earlier when it had ended already).
#[derive(Clone, Debug, PartialEq)]
pub struct DurableRun {
    /// The run.
    pub run_id: String,
    /// How it ended and what it printed.
    pub end: EndRecord,
    /// The request filed for it, when it parked.
    pub request: Option<ApprovalRequest>,
    /// True when the run had ended before this command (nothing ran).
    pub already_ended: bool,
}

/// A run as `rolegate runs list` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRow {
    /// The run.
    pub run_id: String,
    /// Its design (`single` for the runs of `--durability exit`).
    pub design: String,
    /// `step` or `exit`.
    pub durability: Durability,
    /// How it ended, or `interrupted` (a durable run with no end: resume it), or the status
    /// of its latest checkpoint.
    pub status: String,
    /// Checkpoints held.
    pub checkpoints: i64,
    /// Other durable records held (plan, hand-offs, end).
    pub records: i64,
    /// Model exchanges recorded (each answer a server gave a durable run on a real model;
    /// 0 on the fakes and for `--durability exit`).
    pub exchanges: i64,
    /// The step of its latest checkpoint.
    pub last_step: Option<u32>,
}

/// A sink that checks a re-executed run against its journal: the steps already durable
/// must come out the same and are not written again; the steps after them are written.
struct Replay {
    writer: Arc<StepWriter>,
    expected: Mutex<Expected>,
}

struct Expected {
    checkpoints: VecDeque<(u32, String)>,
    records: VecDeque<StepRecord>,
}

impl StepSink for Replay {
    fn agent_step(
        &self,
        state: &AgentState,
        progress: &Progress,
        audit: &[AuditEvent],
    ) -> BoxFuture<'static, Result<(), String>> {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        match expected.checkpoints.pop_front() {
            Some((step, status)) if step == state.step() && status == state.status().name() => {
                Box::pin(std::future::ready(Ok(())))
            }
            Some((step, status)) => {
                let why = format!(
                    "diverged: durable checkpoint {step} ({status}), the re-executed run reached {} ({})",
                    state.step(),
                    state.status().name()
                );
                Box::pin(std::future::ready(Err(why)))
            }
            None => self.writer.agent_step(state, progress, audit),
        }
    }

    fn design_step(
        &self,
        run_id: &str,
        kind: &'static str,
        step: u32,
        body: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        match expected.records.pop_front() {
            Some(r) if r.kind == kind && r.step == step && r.body == body => Box::pin(std::future::ready(Ok(()))),
            Some(r) => {
                let why =
                    format!("diverged: durable {} #{} differs from the re-executed {kind} #{step}", r.kind, r.step);
                Box::pin(std::future::ready(Err(why)))
            }
            None => self.writer.design_step(run_id, kind, step, body),
        }
    }
}

fn store_err(e: impl std::fmt::Display) -> DeskError {
    DeskError::Store(StoreError::Encode(e.to_string()))
}

impl Desk {
    /// Starts a durable run of `spec` (which names its design and goal): the run is
    /// recorded in its own transaction, then carried out with every step committed by
    /// `writer` before the next.
    ///
    /// # Errors
    /// [`DeskError`]; steps committed before an error stay (the run can be resumed).
    pub async fn start_durable(&mut self, spec: &RunSpec, writer: &Arc<StepWriter>) -> Result<DurableRun, DeskError> {
        if spec.durable.is_none() {
            return Err(store_err("a durable run needs its design and goal in the spec"));
        }
        let run_id = {
            let tx = self.store.begin()?;
            rows::bind_key(&tx, &self.key, true)?;
            let json = serde_json::to_string(spec).map_err(|e| StoreError::Encode(e.to_string()))?;
            let id = rows::new_run(&tx, &json, &self.key)?;
            // a new run is this process's from its first step
            let _ = super::lease::take(&tx, &id)?;
            tx.commit().map_err(StoreError::from)?;
            id
        };
        self.leased(&run_id, spec, writer).await
    }

    /// Carries a run whose lease this process holds, and gives the lease back however the
    /// run ends (a process that dies leaves it to be taken over).
    async fn leased(
        &mut self,
        run_id: &str,
        spec: &RunSpec,
        writer: &Arc<StepWriter>,
    ) -> Result<DurableRun, DeskError> {
        let carried = self.carry(run_id, spec, writer).await;
        if let Ok(tx) = self.store.begin()
            && super::lease::give_back(&tx, run_id).is_ok()
        {
            let _ = tx.commit();
        }
        carried
    }

    /// Takes `run_id`'s lease for this process.
    ///
    /// # Errors
    /// [`DeskError::Running`] when a live process holds it.
    fn take_lease(&mut self, run_id: &str) -> Result<(), DeskError> {
        let tx = self.store.begin()?;
        match super::lease::take(&tx, run_id)? {
            Ok(()) => {
                tx.commit().map_err(StoreError::from)?;
                Ok(())
            }
            Err(h) => Err(DeskError::Running { run_id: run_id.to_string(), pid: h.pid, host: h.host, since: h.since }),
        }
    }

    /// Continues durable run `run_id` from its last durable step (see the module's notes);
    /// a run that has ended is returned as it ended, and nothing runs.
    ///
    /// # Errors
    /// [`DeskError::NotDurable`] for a run of `--durability exit`, [`DeskError::Diverged`]
    /// when a re-executed step differs from its durable record, others as [`DeskError`].
    pub async fn resume(&mut self, run_id: &str, writer: &Arc<StepWriter>) -> Result<DurableRun, DeskError> {
        rows::bind_key(self.store.conn(), &self.key, false)?;
        let spec: RunSpec = serde_json::from_str(&rows::run_spec(self.store.conn(), run_id, &self.key)?)
            .map_err(|e| StoreError::BadRow { what: format!("run {run_id}"), detail: e.to_string() })?;
        if spec.durable.is_none() {
            return Err(DeskError::NotDurable(run_id.to_string()));
        }
        if let Some(end) = self.end_of(run_id)? {
            return Ok(DurableRun { run_id: run_id.to_string(), end, request: None, already_ended: true });
        }
        // the run goes on in the world, policy, prices, prompts and call graph it ran in
        self.env = spec.env_over(run_id, &self.env)?;
        // one driver at a time: a live one makes this a conflict, before any model is asked
        self.take_lease(run_id)?;
        self.leased(run_id, &spec, writer).await
    }

    /// The `end` record of a run, when it has one.
    fn end_of(&self, run_id: &str) -> Result<Option<EndRecord>, DeskError> {
        let journal = steps_of(self.store.conn(), Some(run_id), &self.key)?;
        if let Some(bad) = journal.bad.into_iter().next() {
            return Err(DeskError::Quarantined(bad));
        }
        match journal.good.into_iter().rev().find(|r| r.kind == END_STEP) {
            Some(r) => Ok(Some(serde_json::from_str(&r.body).map_err(store_err)?)),
            None => Ok(None),
        }
    }

    /// The verified latest checkpoint of a run, if it has one.
    fn latest_of(&self, run_id: &str) -> Result<Option<Checkpoint>, DeskError> {
        match rows::latest_checkpoint(self.store.conn(), run_id) {
            Ok(text) => Checkpoint::open(&text, &self.key)
                .map(Some)
                .map_err(|source| DeskError::Checkpoint { run_id: run_id.into(), source }),
            Err(StoreError::BadRow { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Carries a recorded durable run to its end, from wherever its journal stands.
    async fn carry(&mut self, run_id: &str, spec: &RunSpec, writer: &Arc<StepWriter>) -> Result<DurableRun, DeskError> {
        let Some(d) = spec.durable.clone() else { return Err(DeskError::NotDurable(run_id.to_string())) };
        let models = self.models_of(run_id, spec, &d, writer)?;
        let models = models.as_ref();
        match d.design.as_str() {
            "single" | "fixed" => self.carry_loop(run_id, spec, &d, writer, None, models).await,
            "plan" => {
                let journal = steps_of(self.store.conn(), Some(run_id), &self.key)?;
                if let Some(bad) = journal.bad.into_iter().next() {
                    return Err(DeskError::Quarantined(bad));
                }
                let record = match journal.good.into_iter().rev().find(|r| r.kind == PLAN_STEP) {
                    Some(r) => Some(serde_json::from_str::<PlanRecord>(&r.body).map_err(store_err)?),
                    // nothing durable after the planner: plan again
                    None => None,
                };
                self.carry_loop(run_id, spec, &d, writer, Some(record), models).await
            }
            _ => self.carry_design(run_id, spec, &d, writer, models).await,
        }
    }

    /// The real models of a durable run, built again from its spec with the key from this
    /// process's environment and every call going through the run's exchange log (loaded
    /// and verified now, before anything runs); `None` for a run on fakes.
    fn models_of(
        &self,
        run_id: &str,
        spec: &RunSpec,
        d: &DurableSpec,
        writer: &Arc<StepWriter>,
    ) -> Result<Option<Rebuilt>, DeskError> {
        let rebuild = |source| DeskError::Rebuild { run_id: run_id.to_string(), source };
        let Some(http) = &d.http else {
            if spec.model.starts_with("openai:") {
                return Err(rebuild(RebuildError::NoSettings(spec.model.clone())));
            }
            return Ok(None);
        };
        let log = match RunExchanges::load(self.store.conn(), run_id, writer.clone()) {
            Ok(log) => log,
            Err(Ok(bad)) => return Err(DeskError::Quarantined(bad)),
            Err(Err(e)) => return Err(e.into()),
        };
        let endpoint =
            http.endpoint(&|k| std::env::var(k).ok(), Some(Exchanges::to(Arc::new(log)))).map_err(rebuild)?;
        Rebuilt::new(http, &endpoint, d.roles, &self.env).map(Some).map_err(rebuild)
    }

    /// The loop designs (single, fixed, a plan's executor): continued from the latest
    /// checkpoint through `Agent::drive`, or started when there is none.
    async fn carry_loop(
        &mut self,
        run_id: &str,
        spec: &RunSpec,
        d: &DurableSpec,
        writer: &Arc<StepWriter>,
        plan: Option<Option<PlanRecord>>,
        models: Option<&Rebuilt>,
    ) -> Result<DurableRun, DeskError> {
        let sent_before = rows::sent(self.store.conn(), &self.key)?.good;
        let mut config = spec.lab_config_for_loop(d, models)?;
        if let Some(Some(p)) = &plan {
            config.decider = DeciderSpec::Fixed(p.executor());
        }
        let env = models.map_or(&self.env, |m| &m.env);
        let mut lab = config.build(env);
        with_outbox(&mut lab, sent_before.clone());
        let pending = rows::pending_of(self.store.conn(), Some(run_id), &self.key)?;
        if let Some(bad) = pending.bad.into_iter().next() {
            return Err(DeskError::Quarantined(bad));
        }
        pending.good.into_iter().for_each(|action| lab.agent.gate.restore_pending(action));
        let latest = self.latest_of(run_id)?;
        // the resumed loop's first step is the latest checkpoint again: not written twice
        let again: VecDeque<(u32, String)> =
            latest.iter().map(|c| (c.state.step(), c.state.status().name().to_string())).collect();
        let sink = Replay {
            writer: writer.clone(),
            expected: Mutex::new(Expected { checkpoints: again, records: VecDeque::new() }),
        };
        lab.agent.set_durable(Durable::to(Arc::new(sink)));
        let design = match d.design.as_str() {
            "fixed" => Design::Fixed,
            "plan" => Design::Plan,
            _ => Design::React,
        };
        let (run, ledger, trace) = match (latest, plan) {
            (_, Some(None)) => {
                // plan: ask the planner; the checked plan is durable before it runs
                let mut planner = planner_of(d, models)?;
                let out =
                    plan_then_execute(planner.as_mut(), &mut lab.agent, &d.goal, run_id).await.map_err(store_err)?;
                match out.run {
                    Some(run) => (run, out.ledger, out.trace),
                    None => return self.plan_rejected(run_id, d, out).await,
                }
            }
            (Some(checkpoint), plan) => {
                lab.agent.restore_memory(checkpoint.state.observations());
                let run = resume_run(&mut lab.agent, checkpoint).await?;
                let (ledger, trace) =
                    plan.flatten().map_or_else(|| (Ledger::default(), Trace::new(run_id)), |p| (p.ledger, p.trace));
                (run, ledger, trace)
            }
            (None, plan) => {
                let run = lab.agent.run(&d.goal, run_id).await?;
                let (ledger, trace) =
                    plan.flatten().map_or_else(|| (Ledger::default(), Trace::new(run_id)), |p| (p.ledger, p.trace));
                (run, ledger, trace)
            }
        };
        let emails = lab.world.outbox.len().saturating_sub(sent_before.len());
        let outcome = DesignOutcome { emails, ..DesignOutcome::from_run(design, run.clone(), &ledger, trace) };
        super::crash_point("durable:before_end");
        let Self { store, key, env, clock, sinks } = self;
        let tx = store.begin()?;
        ended_elsewhere(&tx, run_id)?;
        let (mut queue, _) = queue_from(&tx, env, clock, key)?;
        let audit_before = queue.audit.len();
        let request = match run.state.pending_id().and_then(|id| lab.agent.gate.pending().get(id)) {
            Some(action) => Some(queue.submit_as(action, rows::new_request_id(&tx)?)?),
            None => None,
        };
        let last = Checkpoint::of(&run)
            .seal(key)
            .map_err(|source| DeskError::Checkpoint { run_id: run_id.to_string(), source })?;
        rows::push_checkpoint(&tx, run_id, run.state.step(), run.state.status().name(), &last)?;
        for action in lab.agent.gate.pending().values() {
            rows::put_pending(&tx, action, key)?;
        }
        rows::push_gate_audit(&tx, lab.agent.gate.audit().get(lab.agent.audit_flushed()..).unwrap_or_default(), key)?;
        save_queue(&tx, &queue, audit_before, key)?;
        rows::push_sent(&tx, run_id, lab.world.outbox.sent().get(sent_before.len()..).unwrap_or(&[]), key)?;
        let lines = if d.design == "single" { single_lines(&run) } else { outcome.lines() };
        let end = EndRecord {
            code: outcome.code.as_str().to_string(),
            lines,
            request: request.as_ref().map(|r| r.id.clone()),
        };
        write_end(&tx, key, run_id, run.state.step(), &end)?;
        sinks_ok(sinks)?;
        super::crash_point("durable:before_end_commit");
        tx.commit().map_err(StoreError::from)?;
        Ok(DurableRun { run_id: run_id.to_string(), end, request, already_ended: false })
    }

    /// A plan refused by its checks: nothing ran; its end is the only record.
    async fn plan_rejected(
        &mut self,
        run_id: &str,
        _d: &DurableSpec,
        out: crate::design::plan::PlanOutcome,
    ) -> Result<DurableRun, DeskError> {
        let outcome = DesignOutcome::plan_rejected(out);
        let end = EndRecord { code: outcome.code.as_str().to_string(), lines: outcome.lines(), request: None };
        super::crash_point("durable:before_end");
        let Self { store, key, sinks, .. } = self;
        let tx = store.begin()?;
        ended_elsewhere(&tx, run_id)?;
        write_end(&tx, key, run_id, 0, &end)?;
        sinks_ok(sinks)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(DurableRun { run_id: run_id.to_string(), end, request: None, already_ended: false })
    }

    /// PolicyPal and the three roles: carried out from the
    /// spec, every step already durable checked against its record.
    async fn carry_design(
        &mut self,
        run_id: &str,
        spec: &RunSpec,
        d: &DurableSpec,
        writer: &Arc<StepWriter>,
        models: Option<&Rebuilt>,
    ) -> Result<DurableRun, DeskError> {
        let design: Design = d.design.parse().map_err(store_err)?;
        let journal = steps_of(self.store.conn(), Some(run_id), &self.key)?;
        if let Some(bad) = journal.bad.into_iter().next() {
            return Err(DeskError::Quarantined(bad));
        }
        let checkpoints = checkpoint_steps(self.store.conn(), run_id)?;
        let replay = Replay {
            writer: writer.clone(),
            expected: Mutex::new(Expected { checkpoints: checkpoints.into(), records: journal.good.into() }),
        };
        // every field is set today; the update keeps a field added later at its default
        #[allow(clippy::needless_update)]
        let cfg = DesignConfig {
            user: spec.user.clone(),
            task: if design == Design::Multi { None } else { Some(spec.task.clone()) },
            fake: if d.fake.is_empty() { "sensible".into() } else { d.fake.clone() },
            model: models.and_then(|m| m.model.clone()),
            roles: models.map_or_else(|| RoleSetup::fakes(d.roles), |m| m.roles.clone()),
            claims: d.claims,
            grants: spec.grants.clone(),
            run_id: run_id.to_string(),
            durable: Durable::to(Arc::new(replay)),
            ..DesignConfig::default()
        };
        let env = models.map_or(&self.env, |m| &m.env);
        let outcome = run_design(design, &d.goal, env, &cfg).await.map_err(|e| {
            let text = e.to_string();
            match text.split_once("diverged: ") {
                Some((_, why)) => DeskError::Diverged { run_id: run_id.to_string(), detail: why.to_string() },
                None => store_err(text),
            }
        })?;
        let step = outcome.steps;
        let end = EndRecord { code: outcome.code.as_str().to_string(), lines: outcome.lines(), request: None };
        super::crash_point("durable:before_end");
        let Self { store, key, sinks, .. } = self;
        let tx = store.begin()?;
        ended_elsewhere(&tx, run_id)?;
        write_end(&tx, key, run_id, step, &end)?;
        sinks_ok(sinks)?;
        super::crash_point("durable:before_end_commit");
        tx.commit().map_err(StoreError::from)?;
        Ok(DurableRun { run_id: run_id.to_string(), end, request: None, already_ended: false })
    }

    /// Every run of the store, oldest first, with how far it got.
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn runs(&self) -> Result<Vec<RunRow>, DeskError> {
        let c = self.store.conn();
        rows::bind_key(c, &self.key, false)?;
        let mut out = Vec::new();
        for (run_id, spec) in rows::all_runs(c, &self.key)? {
            // a run whose row does not verify is listed as unreadable, never read
            let spec: Option<RunSpec> = spec.ok().and_then(|s| serde_json::from_str(&s).ok());
            let (checkpoints, records, last) = run_summary(c, &run_id)?;
            let exchanges = exchange_count(c, &run_id)?;
            let durable = spec.as_ref().and_then(|s| s.durable.clone());
            let design = match (&durable, &spec) {
                (Some(d), _) => d.design.clone(),
                (None, Some(s)) if s.model.starts_with(super::POLICYPAL_MODEL) => "policypal".into(),
                (None, Some(_)) => "single".into(),
                (None, None) => "unreadable".into(),
            };
            let driver = super::lease::holder(c, &run_id)?;
            let status = match (&durable, self.end_of(&run_id)) {
                (_, Ok(Some(end))) => end.code,
                (_, Err(DeskError::Quarantined(_))) => "refused (see store check)".into(),
                (Some(_), _) if driver.is_some() => {
                    format!("running (pid {})", driver.map_or(0, |h| h.pid))
                }
                (Some(_), _) => "interrupted".into(),
                (None, _) => last.as_ref().map_or_else(|| "no checkpoint".into(), |(_, s)| s.clone()),
            };
            out.push(RunRow {
                run_id,
                design,
                durability: if durable.is_some() { Durability::Step } else { Durability::Exit },
                status,
                checkpoints,
                records,
                exchanges,
                last_step: last.map(|(s, _)| s),
            });
        }
        Ok(out)
    }
}

/// The `(step, status)` of every checkpoint of a run, in order.
fn checkpoint_steps(c: &rusqlite::Connection, run_id: &str) -> Result<Vec<(u32, String)>, StoreError> {
    let mut st = c.prepare("SELECT step, status FROM checkpoints WHERE run_id = ?1 ORDER BY seq")?;
    let rows = st.query_map(rusqlite::params![run_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Refuses to end a run that another process ended meanwhile (two resumes of one run at
/// once): checked under the write lock, so only one end, one request and one parked
/// action are ever written.
fn ended_elsewhere(c: &rusqlite::Connection, run_id: &str) -> Result<(), DeskError> {
    let ended: i64 = c
        .query_row(
            "SELECT count(*) FROM steps WHERE run_id = ?1 AND kind = ?2",
            rusqlite::params![run_id, END_STEP],
            |r| r.get(0),
        )
        .map_err(StoreError::from)?;
    if ended > 0 {
        return Err(DeskError::Diverged {
            run_id: run_id.to_string(),
            detail: "another process ended this run meanwhile; its end is kept".into(),
        });
    }
    Ok(())
}

fn write_end(
    c: &rusqlite::Connection,
    key: &crate::human::SigningKey,
    run_id: &str,
    step: u32,
    end: &EndRecord,
) -> Result<(), StoreError> {
    let body = serde_json::to_string(end).map_err(|e| StoreError::Encode(e.to_string()))?;
    let sig = sign_step(key, run_id, END_STEP, step, &body);
    push_step(c, run_id, END_STEP, step, &body, &sig)
}

impl RunSpec {
    /// A durable spec of `design` for `goal`.
    pub fn durable(mut self, d: DurableSpec) -> Self {
        self.durable = Some(d);
        self
    }

    /// The lab of a loop design (single: the spec's model; fixed: the routing rules' plan;
    /// plan: replaced by the checked plan).
    fn lab_config_for_loop(
        &self,
        d: &DurableSpec,
        models: Option<&Rebuilt>,
    ) -> Result<crate::lab::LabConfig, DeskError> {
        match (d.design.as_str(), models.and_then(|m| m.model.clone())) {
            ("single", Some(http)) => Ok(crate::lab::LabConfig {
                decider: DeciderSpec::Http(http),
                user: self.user.clone(),
                task: self.task.clone(),
                grants: self.grants.clone(),
                ..crate::lab::LabConfig::default()
            }),
            ("single", None) => self.lab_config(),
            _ => Ok(crate::lab::LabConfig {
                decider: DeciderSpec::Fixed(FixedPlan::new(crate::design::route(
                    &d.goal,
                    &crate::design::default_routes(),
                ))),
                user: self.user.clone(),
                task: self.task.clone(),
                grants: self.grants.clone(),
                ..crate::lab::LabConfig::default()
            }),
        }
    }
}

/// The lines `rolegate run` has always printed for a single run: its trace, usage, answer
/// and the state line.
fn single_lines(run: &crate::agent::Run) -> Vec<String> {
    let mut lines = run.trace().lines();
    let state = &run.state;
    lines.push(crate::design::usage_line("agent", &run.ledger().summary()));
    if let Some(answer) = state.answer() {
        lines.push(crate::design::answer_line(answer));
    }
    lines.push(format!("{} {} {} calls={:?}", state.run_id(), state.status().name(), run.reason(), run.calls()));
    lines
}

/// The planner of a durable plan run: the run's real model when it had one, else its fake.
fn planner_of(d: &DurableSpec, models: Option<&Rebuilt>) -> Result<Box<dyn LlmClient>, DeskError> {
    Ok(match models.and_then(|m| m.model.clone()) {
        Some(http) => Box::new(HttpClient::new(http)),
        None => {
            let kind = if d.fake.is_empty() { "sensible" } else { d.fake.as_str() };
            let kind: PlanFakeKind = kind.parse().map_err(store_err)?;
            Box::new(PlanFake::new(kind))
        }
    })
}
