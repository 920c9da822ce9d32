//! The approval desk: the flows the command line runs across processes, each one store
//! transaction. `start` runs a goal and, when it parks, files the request; `decide`
//! rebuilds the run from the store in a new process (verified checkpoint, parked actions
//! with their stored results, the outbox sent so far) and applies a person's decision
//! through [`resume_with_decision`] or [`cancel_waiting`].

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};

use super::{BadRow, RowCode, Rows, Store, StoreError, rows};
use crate::agent::{AgentError, Env, Run};
use crate::cost::SharedClock;
use crate::human::{
    ApprovalError, ApprovalQueue, ApprovalRequest, Approver, ApproverKey, AuditLine, Checkpoint, CheckpointCode,
    CheckpointError, DecisionCode, DecisionStatement, IdentityCode, IdentityError, RequestStatus, ResumeError,
    ResumeVerdict, SignedDecision, SigningKey, cancel_waiting, resume_with_decision,
};
use crate::lab::{DeciderSpec, Lab, LabConfig};
use crate::model::{FakeKind, ScriptedModel, research_script};
use crate::world::SentEmail;

/// Errors of the desk flows. Nothing is written when one occurs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeskError {
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored checkpoint was refused (tampered, junk, another key).
    #[error("stored checkpoint of {run_id} refused: {source}")]
    Checkpoint {
        /// The run.
        run_id: String,
        /// Why.
        source: CheckpointError,
    },
    /// The run could not be carried out.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The decision could not be applied.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The approval queue refused.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// The row the decision needs was set aside (it failed its signature or its schema);
    /// nothing ran. Every other request and run is unaffected.
    #[error("{0}; nothing ran (see `rolegate store check`)")]
    Quarantined(BadRow),
    /// An approver's key or a signed decision was refused (a named code); nothing ran.
    #[error("refused: {0}; nothing ran")]
    Identity(#[from] IdentityError),
    /// A PolicyPal run: its card is decided in the process that showed it
    /// (`rolegate run --design policypal --card confirm --key FILE`).
    #[error(
        "{0} is a PolicyPal run: its card is decided with `rolegate run --design policypal --card confirm --key FILE`, in the process that showed it"
    )]
    NotResumable(String),
    /// An output sink (say the `--trace-json` file) could not be written before the
    /// commit; the transaction was rolled back, so nothing was filed, decided or sent.
    #[error("{0}; the store was not changed: nothing was filed, decided or sent")]
    Sink(String),
    /// A run of `--durability exit` (or of a store written before durable runs): it has no
    /// durable steps to continue from.
    #[error("{0} was not run with --durability step: there are no durable steps to resume it from")]
    NotDurable(String),
    /// A re-executed step of a resumed run differs from its durable record: nothing of it
    /// was written.
    #[error("{run_id}: {detail}; the resume stopped and wrote nothing further")]
    Diverged {
        /// The run.
        run_id: String,
        /// Which step and how.
        detail: String,
    },
    /// A run another live process is driving now: nothing ran (try again once it ends).
    #[error(
        "{run_id} is being driven by process {pid} on {host} since {since}: a second driver would pay for its exchanges again; nothing ran"
    )]
    Running {
        /// The run.
        run_id: String,
        /// The process holding it.
        pid: u32,
        /// Its host.
        host: String,
        /// Since when (seconds since the Unix epoch).
        since: String,
    },
    /// A run whose recorded inputs (world, policy, prices, prompts, call graph) cannot be
    /// rebuilt as they were: nothing ran.
    #[error("{run_id}: {source}; nothing ran")]
    InputsDiffer {
        /// The run.
        run_id: String,
        /// What differs.
        source: super::InputsDiffer,
    },
    /// A run spec that names no known model.
    #[error("model {0:?}: use auto, scripted:research or fake:<kind>")]
    UnknownModel(String),
    /// A durable run on a real model whose client cannot be rebuilt from its spec and
    /// this process's environment (say its API key is missing): nothing ran.
    #[error("{run_id}: its model client cannot be rebuilt: {source}; nothing ran")]
    Rebuild {
        /// The run.
        run_id: String,
        /// Why.
        source: super::durable_http::RebuildError,
    },
}

/// How to rebuild a run's agent in another process: model, user, task and grants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// `scripted:research`, `fake:<kind>`, or (a durable run, see
    /// [`DurableSpec::http`](super::DurableSpec::http)) `openai:<name>`.
    pub model: String,
    /// The signed-in user.
    pub user: String,
    /// The task.
    pub task: String,
    /// Write tools granted (each use still needs a person).
    pub grants: Vec<String>,
    /// A run made durable step by step (`--durability step`): its design and goal, so
    /// `rolegate resume` can rebuild it. Absent in the runs of `--durability exit` (and of
    /// stores written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durable: Option<super::durable::DurableSpec>,
    /// What the run ran on (world, policy, prices, prompts, call graph): every command
    /// that touches the run later rebuilds its environment from this. Absent in runs
    /// recorded before it, which get the bundled data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<super::RunData>,
}

impl RunSpec {
    /// A spec; model `auto` is the research script for the `reply` task (which grants
    /// `send_email_draft`, so the e-mail parks for a person) and `fake:sensible` otherwise.
    pub fn new(model: &str, user: &str, task: &str, grants: &[String]) -> Self {
        let mut grants = grants.to_vec();
        let model = match model {
            "auto" if task == "reply" => {
                if !grants.iter().any(|g| g == "send_email_draft") {
                    grants.push("send_email_draft".into());
                }
                "scripted:research"
            }
            "auto" => "fake:sensible",
            other => other,
        };
        Self { model: model.into(), user: user.into(), task: task.into(), grants, durable: None, data: None }
    }

    /// This spec with the record of what a run in `env` runs on (see [`super::RunData`]).
    ///
    /// # Errors
    /// A message when the bundled data does not load.
    pub fn with_data(mut self, env: &Env) -> Result<Self, String> {
        self.data = Some(super::RunData::of(env)?);
        Ok(self)
    }

    /// The environment a run of this spec ran in, built from its record over `bundled`
    /// (the bundled data for a spec recorded before runs kept theirs).
    ///
    /// # Errors
    /// [`DeskError::InputsDiffer`] naming what cannot be rebuilt as it was.
    pub(crate) fn env_over(&self, run_id: &str, bundled: &Env) -> Result<Env, DeskError> {
        match &self.data {
            Some(d) => d.env(bundled).map_err(|source| DeskError::InputsDiffer { run_id: run_id.to_string(), source }),
            None => Ok(bundled.clone()),
        }
    }

    /// The lab a decision continues a parked run of this spec in: its own model, a real
    /// one rebuilt from the durable settings it recorded (the key read again from this
    /// process's environment, sent only where the run sent it); `env` becomes the
    /// environment that model is priced in.
    ///
    /// # Errors
    /// [`DeskError::Rebuild`] when the real model cannot be rebuilt; as
    /// [`RunSpec::lab_config`] otherwise.
    pub(crate) fn decided_config(&self, run_id: &str, env: &mut Env) -> Result<LabConfig, DeskError> {
        let http = self.durable.as_ref().and_then(|d| d.http.as_ref().filter(|_| d.design == "single"));
        let Some(http) = http.filter(|_| self.model.starts_with("openai:")) else { return self.lab_config() };
        let rebuild = |source| DeskError::Rebuild { run_id: run_id.to_string(), source };
        let endpoint = http.endpoint(&|k| std::env::var(k).ok(), None).map_err(rebuild)?;
        let models = super::durable_http::Rebuilt::new(http, &endpoint, crate::multi::Behaviours::default(), env)
            .map_err(rebuild)?;
        let Some(model) = models.model else {
            return Err(rebuild(super::RebuildError::NoSettings(self.model.clone())));
        };
        *env = models.env;
        Ok(LabConfig {
            decider: DeciderSpec::Http(model),
            user: self.user.clone(),
            task: self.task.clone(),
            grants: self.grants.clone(),
            ..LabConfig::default()
        })
    }

    /// The lab this spec describes.
    ///
    /// # Errors
    /// [`DeskError::UnknownModel`].
    pub fn lab_config(&self) -> Result<LabConfig, DeskError> {
        let decider = match self.model.split_once(':') {
            Some(("scripted", "research")) => DeciderSpec::Scripted(ScriptedModel::new(research_script())),
            Some(("fake", kind)) => {
                DeciderSpec::Fake(kind.parse::<FakeKind>().map_err(|_| DeskError::UnknownModel(self.model.clone()))?)
            }
            _ => return Err(DeskError::UnknownModel(self.model.clone())),
        };
        Ok(LabConfig {
            decider,
            user: self.user.clone(),
            task: self.task.clone(),
            grants: self.grants.clone(),
            ..LabConfig::default()
        })
    }
}

/// What a person can do with a request at the desk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeskAction {
    /// Approve: the action runs once and the run continues.
    Approve,
    /// Deny: the run stops as denied.
    Deny,
    /// Deny and let the model replan.
    DenyReplan,
    /// Withdraw: the run stops as cancelled.
    Cancel,
}

impl DeskAction {
    /// The decision as signed: `approve`, `deny` (also with replanning) or `cancel`.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny | Self::DenyReplan => "deny",
            Self::Cancel => "cancel",
        }
    }
}

/// A run started at the desk.
#[derive(Clone, Debug, PartialEq)]
pub struct Started {
    /// The run (parked, finished or stopped).
    pub run: Run,
    /// The request filed for it, when it parked.
    pub request: Option<ApprovalRequest>,
}

/// The run spec model of a PolicyPal run (`policypal:KIND`).
pub const POLICYPAL_MODEL: &str = "policypal:";

/// A PolicyPal card filed and decided at the desk.
#[derive(Clone, Debug, PartialEq)]
pub struct CardDecision {
    /// The request the card became (approved, or still pending after a refusal).
    pub request: ApprovalRequest,
    /// The queue's answer.
    pub code: DecisionCode,
    /// What the gate did with the card's call, when the approval ran it.
    pub outcome: Option<crate::gate::GateOutcome>,
    /// E-mails the approval sent (0 or 1).
    pub sent_now: usize,
}

/// A decision taken at the desk.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    /// The queue's answer.
    pub code: DecisionCode,
    /// The run afterwards (`None` for an unknown request).
    pub run: Option<Run>,
    /// True when an earlier approval's stored result was replayed.
    pub replayed: bool,
    /// E-mails this decision sent (0 or 1).
    pub sent_now: usize,
}

/// The requests of a store as a person lists them.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    /// The requests that verified, oldest first (expired ones marked as such).
    pub requests: Vec<ApprovalRequest>,
    /// The request rows set aside, by id, with the reason.
    pub refused: Vec<BadRow>,
}

/// A check run just before each commit: every output sink is written and flushed
/// (returns why not), so an error there rolls the command back instead of following an
/// effect. Effects last.
pub struct SinkCheck(Box<dyn Fn() -> Result<(), String> + Send + Sync>);

impl SinkCheck {
    /// A check from a function that flushes the sinks.
    pub fn new(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self(Box::new(check))
    }
}

impl std::fmt::Debug for SinkCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SinkCheck(..)")
    }
}

pub(super) fn sinks_ok(check: &Option<SinkCheck>) -> Result<(), DeskError> {
    match check {
        Some(SinkCheck(f)) => f().map_err(DeskError::Sink),
        None => Ok(()),
    }
}

/// The flows of the command line over one store.
#[derive(Debug)]
pub struct Desk {
    /// The store; owned by the desk.
    pub store: Store,
    /// Signs and verifies checkpoints.
    pub(super) key: SigningKey,
    /// World, policy and prices runs are built in.
    pub(super) env: Env,
    /// Time for approvals (expiry, audit).
    pub(super) clock: SharedClock,
    /// Flushes the output sinks before each commit ([`Desk::check_sinks_with`]).
    pub(super) sinks: Option<SinkCheck>,
}

/// The queue held in the store: its requests and audit lines that read back, and the
/// request rows set aside.
pub(super) fn queue_from(
    c: &rusqlite::Connection,
    env: &Env,
    clock: &SharedClock,
    key: &SigningKey,
) -> Result<(ApprovalQueue, Vec<BadRow>), StoreError> {
    let mut queue = ApprovalQueue::new(ApprovalQueue::approvers_of(&env.world), clock.clone());
    let requests = rows::requests(c, key)?;
    for r in requests.good {
        queue.requests.insert(r.id.clone(), r);
    }
    queue.audit = rows::approval_audit(c, key)?.good;
    Ok((queue, requests.bad))
}

pub(super) fn save_queue(
    c: &rusqlite::Connection,
    queue: &ApprovalQueue,
    audit_before: usize,
    key: &SigningKey,
) -> Result<(), StoreError> {
    for r in queue.requests.values() {
        rows::put_request(c, r, key)?;
    }
    let new: &[AuditLine] = queue.audit.get(audit_before..).unwrap_or(&[]);
    rows::push_approval_audit(c, new, key)
}

/// A row whose column says something its signed record does not.
fn disagrees(table: &'static str, id: String, column: &str) -> BadRow {
    let detail = format!("its {column} column is not what its signed record says: edited in the file");
    BadRow { table, id, code: RowCode::BadSchema, detail }
}

/// The rows of a run-numbered table (`seq` counting 1, 2, … per run) whose number breaks
/// the count: a number edited in the file (the rows are read in that order).
fn gaps(table: &'static str, rows: Vec<(String, i64)>) -> Vec<BadRow> {
    let mut bad = Vec::new();
    let mut last: Option<(String, i64)> = None;
    for (run_id, seq) in rows {
        let expected = match &last {
            Some((run, n)) if *run == run_id => n + 1,
            _ => 1,
        };
        if seq != expected {
            let detail = format!("numbered {seq} where the run's rows count {expected}: renumbered in the file");
            bad.push(BadRow { table, id: format!("{run_id}#{seq}"), code: RowCode::BadSchema, detail });
        }
        last = Some((run_id, seq));
    }
    bad
}

/// A recorded decision row for `store check`: it reads back, its approver is registered,
/// and it verifies for its request as that request stands.
fn check_decision(
    registry: &Rows<Approver>,
    requests: &[ApprovalRequest],
    request_id: &str,
    json: &str,
) -> Result<(), BadRow> {
    let bad = |code, detail: String| BadRow { table: "decisions", id: request_id.to_string(), code, detail };
    let signed: crate::human::SignedDecision =
        serde_json::from_str(json).map_err(|e| bad(RowCode::BadSchema, format!("does not read back: {e}")))?;
    let Some(req) = requests.iter().find(|r| r.id == request_id) else {
        return Err(bad(RowCode::BadSchema, "no such request (or its row is set aside)".into()));
    };
    let statement: Option<DecisionStatement> = serde_json::from_str(&signed.statement).ok();
    let (by, verb) = statement.map_or((String::new(), String::new()), |s| (s.approver, s.decision));
    let approver = registered(registry, &by).map_err(|e| bad(RowCode::BadSignature, e.to_string()))?;
    signed.verify(&approver, req, &verb).map_err(|e| {
        let code =
            if e.code == IdentityCode::BadDecisionSignature { RowCode::BadSignature } else { RowCode::BadSchema };
        bad(code, e.to_string())
    })?;
    Ok(())
}

/// Who decides: a name the caller vouches for, or the owner of an approver's key.
#[derive(Clone, Copy, Debug)]
enum Actor<'a> {
    Named(&'a str),
    Requester(&'a str),
    Key(&'a ApproverKey),
}

/// Who decides `req`, by name, and their signed decision when they decide with a key:
/// a name, the requester withdrawing their own request, or a registered approver's key,
/// whose statement is signed and checked as a recorded decision is, before anything runs.
fn identify(
    who: Actor<'_>,
    req: &ApprovalRequest,
    registry: &Rows<Approver>,
    action: DeskAction,
    clock: &SharedClock,
) -> Result<(String, Option<SignedDecision>), DeskError> {
    Ok(match who {
        Actor::Named(name) => (name.to_string(), None),
        Actor::Requester(name) if name == req.requested_by => (name.to_string(), None),
        Actor::Requester(name) => {
            let detail = format!(
                "{name} is not the requester of {}; only the requester withdraws by name, an approver signs with --key",
                req.id
            );
            return Err(DeskError::Identity(IdentityError::new(IdentityCode::NoKey, detail)));
        }
        Actor::Key(k) => {
            let approver = registered(registry, k.name())?;
            if approver.public_key != k.public_hex() {
                let detail = format!("this key ({}) is not the one registered for {}", k.fingerprint(), k.name());
                return Err(DeskError::Identity(IdentityError::new(IdentityCode::UnknownKey, detail)));
            }
            let statement = DecisionStatement::new(req, action.verb(), clock.now().as_secs_f64(), k);
            let signed = k.sign(&statement)?;
            // the same check a recorded decision passes, before anything runs
            signed.verify(&approver, req, action.verb())?;
            (approver.name, Some(signed))
        }
    })
}

/// The registered approver `name`, from rows that verify.
fn registered(registry: &Rows<Approver>, name: &str) -> Result<Approver, DeskError> {
    if let Some(bad) = registry.bad.iter().find(|b| b.id == name) {
        let detail = format!("{name}'s registry row is refused ({}: {})", bad.code, bad.detail);
        return Err(DeskError::Identity(IdentityError::new(IdentityCode::ApproverRowRefused, detail)));
    }
    registry.good.iter().find(|a| a.name == name).cloned().ok_or_else(|| {
        DeskError::Identity(IdentityError::new(IdentityCode::UnknownKey, format!("no approver {name} is registered")))
    })
}

/// Checks the signed decision behind a recorded approval of `req`, and that the parked
/// call is still the one it reviewed.
fn recorded_approval(
    c: &rusqlite::Connection,
    registry: &Rows<Approver>,
    req: &ApprovalRequest,
    gate: &crate::gate::ToolGate,
) -> Result<(), DeskError> {
    let refuse = |code, detail: String| DeskError::Identity(IdentityError::new(code, detail));
    let signed = match rows::decision(c, &req.id)? {
        Some(Ok(d)) => d,
        Some(Err(bad)) => return Err(refuse(IdentityCode::BadDecisionSignature, bad.to_string())),
        None => return Err(refuse(IdentityCode::NoDecision, format!("{} is marked approved without one", req.id))),
    };
    let by = req.decided_by.as_deref().unwrap_or_default();
    let approver = registered(registry, by)?;
    signed.verify(&approver, req, DeskAction::Approve.verb())?;
    let now = gate.pending().get(&req.pending_id).filter(|p| p.run_id == req.run_id).map(|p| p.call.fingerprint());
    if now.as_deref() != Some(req.fingerprint.as_str()) {
        let detail = format!("{}: the parked call is not the one the decision reviewed", req.id);
        return Err(refuse(IdentityCode::ChangedSinceReview, detail));
    }
    Ok(())
}

pub(super) fn with_outbox(lab: &mut Lab, sent: Vec<SentEmail>) {
    // the lab's world is the gate's: one outbox, filled in place
    lab.world.outbox.load(sent);
}

impl Desk {
    /// A desk over `store`.
    pub fn new(store: Store, key: SigningKey, env: Env, clock: SharedClock) -> Self {
        Self { store, key, env, clock, sinks: None }
    }

    /// Runs `check` just before each commit: when it fails, the command's transaction is
    /// rolled back and [`DeskError::Sink`] says nothing was done.
    #[must_use]
    pub fn check_sinks_with(mut self, check: SinkCheck) -> Self {
        self.sinks = Some(check);
        self
    }

    /// Runs `goal` as described by `spec`; a run that parks files an approval request.
    /// Checkpoints of every step, the parked actions, both audits and the request are
    /// written in one transaction.
    ///
    /// # Errors
    /// [`DeskError`]; on any error nothing is written.
    pub async fn start(&mut self, spec: &RunSpec, goal: &str) -> Result<Started, DeskError> {
        let Self { store, key, env, clock, sinks } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        let sent_before = rows::sent(&tx, key)?.good;
        let spec_json = serde_json::to_string(spec).map_err(|e| StoreError::Encode(e.to_string()))?;
        let run_id = rows::new_run(&tx, &spec_json, key)?;
        let mut lab = spec.lab_config()?.build(env);
        with_outbox(&mut lab, sent_before.clone());
        let sealed: Arc<Mutex<Vec<(u32, String, String)>>> = Arc::default();
        let sink = sealed.clone();
        let hook_key = key.clone();
        lab.agent.on_step.push(Box::new(move |state, progress| {
            let text = Checkpoint::new(state, progress).seal(&hook_key).map_err(|e| e.to_string())?;
            sink.lock().unwrap_or_else(PoisonError::into_inner).push((
                state.step(),
                state.status().name().to_string(),
                text,
            ));
            Ok(())
        }));
        let run = lab.agent.run(goal, &run_id).await?;
        let (mut queue, _) = queue_from(&tx, env, clock, key)?;
        let audit_before = queue.audit.len();
        let request = match run.state.pending_id().and_then(|id| lab.agent.gate.pending().get(id)) {
            Some(action) => Some(queue.submit_as(action, rows::new_request_id(&tx)?)?),
            None => None,
        };
        let steps = std::mem::take(&mut *sealed.lock().unwrap_or_else(PoisonError::into_inner));
        for (step, status, text) in steps {
            rows::push_checkpoint(&tx, &run_id, step, &status, &text)?;
        }
        let last = Checkpoint::of(&run)
            .seal(key)
            .map_err(|source| DeskError::Checkpoint { run_id: run.state.run_id().to_string(), source })?;
        rows::push_checkpoint(&tx, &run_id, run.state.step(), run.state.status().name(), &last)?;
        for action in lab.agent.gate.pending().values() {
            rows::put_pending(&tx, action, key)?;
        }
        rows::push_gate_audit(&tx, lab.agent.gate.audit(), key)?;
        save_queue(&tx, &queue, audit_before, key)?;
        rows::push_sent(&tx, &run_id, lab.world.outbox.sent().get(sent_before.len()..).unwrap_or(&[]), key)?;
        sinks_ok(sinks)?;
        super::crash_point("start:before_commit");
        tx.commit().map_err(StoreError::from)?;
        Ok(Started { run, request })
    }

    /// Applies `actor`'s decision on request `request_id` in this process: the run is
    /// rebuilt from the store (its latest checkpoint is verified first), the decision is
    /// applied, and everything it changed is written in one transaction. The store's write
    /// lock is held throughout, so two processes deciding at once are serialised.
    ///
    /// # Errors
    /// [`DeskError::Checkpoint`] for a tampered stored checkpoint, others as [`DeskError`];
    /// on any error nothing is written and nothing is sent.
    ///
    /// The caller vouches for `actor` (library code in one process); across processes use
    /// [`Desk::decide_signed`], where the approver is read from their key.
    pub async fn decide(&mut self, request_id: &str, actor: &str, action: DeskAction) -> Result<Decided, DeskError> {
        self.decide_as(request_id, Actor::Named(actor), action).await
    }

    /// Withdraws `request_id` as its requester `requester`, by name: requesters hold no
    /// approver key, and a withdrawal runs nothing. Any other name is refused (`no_key`):
    /// an approver cancels with their key ([`Desk::decide_signed`]).
    ///
    /// # Errors
    /// [`DeskError::Identity`] for a name that is not the requester's, others as
    /// [`Desk::decide`].
    pub async fn withdraw(&mut self, request_id: &str, requester: &str) -> Result<Decided, DeskError> {
        self.decide_as(request_id, Actor::Requester(requester), DeskAction::Cancel).await
    }

    /// Applies the decision of the owner of `approver_key` on `request_id`: the key must
    /// be the one registered for that approver (registry row verified first); the decision
    /// is a statement over the request id, the fingerprint of the exact action, the
    /// decision and the time, signed with the key and verified against the registered
    /// public key before anything runs; it is recorded with the decision. Who decided,
    /// and so self-approval and "not an approver", come from the key, never a typed name.
    ///
    /// # Errors
    /// [`DeskError::Identity`] with a named code, others as [`Desk::decide`]; on any error
    /// nothing is written and nothing is sent.
    pub async fn decide_signed(
        &mut self,
        request_id: &str,
        approver_key: &ApproverKey,
        action: DeskAction,
    ) -> Result<Decided, DeskError> {
        self.decide_as(request_id, Actor::Key(approver_key), action).await
    }

    /// Registers `approver` (a user with the approver role) with their public key. A name
    /// is registered once; its key is never replaced in place.
    ///
    /// # Errors
    /// [`DeskError::Identity`] (`not_an_approver`, `already_registered`), [`DeskError::Store`].
    pub fn add_approver(&mut self, approver: &Approver) -> Result<(), DeskError> {
        let Self { store, key, env, sinks, .. } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        if !ApprovalQueue::approvers_of(&env.world).contains(&approver.name) {
            let detail = format!("{} does not have the approver role", approver.name);
            return Err(DeskError::Identity(IdentityError::new(IdentityCode::NotAnApprover, detail)));
        }
        let registry = rows::approvers(&tx, key)?;
        if registry.good.iter().any(|a| a.name == approver.name) || registry.bad.iter().any(|b| b.id == approver.name) {
            let detail = format!("{} has a key already; it is never replaced in place", approver.name);
            return Err(DeskError::Identity(IdentityError::new(IdentityCode::AlreadyRegistered, detail)));
        }
        rows::put_approver(&tx, approver, key)?;
        sinks_ok(sinks)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(())
    }

    /// Records a new run of `spec` at once (its own transaction) and returns its id, for
    /// a run carried out outside the desk (a PolicyPal run) whose card is then filed with
    /// [`Desk::decide_card`].
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn reserve_run(&mut self, spec: &RunSpec) -> Result<String, DeskError> {
        let Self { store, key, .. } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        let spec_json = serde_json::to_string(spec).map_err(|e| StoreError::Encode(e.to_string()))?;
        let run_id = rows::new_run(&tx, &spec_json, key)?;
        tx.commit().map_err(StoreError::from)?;
        Ok(run_id)
    }

    /// Files the card of a parked PolicyPal run as an approval request, like any parked
    /// write, and applies the signed approval of `approver_key`'s owner, in one
    /// transaction: the key must be the registered one; the request passes the queue's
    /// rules (cap, expiry, not an approver, self-approval from the key's owner, the exact
    /// call reviewed); the approval runs exactly the parked call through `gate`, once, with
    /// the queue's token. The run's checkpoint, parked actions, both audits, the request,
    /// the signed decision and the mail sent are written. A refusal still files the request
    /// (pending) and runs nothing.
    ///
    /// # Errors
    /// [`DeskError::Identity`] for a key that is not registered, [`DeskError::Approval`]
    /// when the queue refuses the request, [`DeskError::Store`]; nothing is written then.
    pub fn decide_card(
        &mut self,
        run: &crate::agent::Run,
        gate: &mut crate::gate::ToolGate,
        sent_before: usize,
        approver_key: &ApproverKey,
    ) -> Result<CardDecision, DeskError> {
        let Self { store, key, env, clock, sinks } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        let registry = rows::approvers(&tx, key)?;
        let approver = registered(&registry, approver_key.name())?;
        if approver.public_key != approver_key.public_hex() {
            let detail =
                format!("this key ({}) is not the one registered for {}", approver_key.fingerprint(), approver.name);
            return Err(DeskError::Identity(IdentityError::new(IdentityCode::UnknownKey, detail)));
        }
        let run_id = run.state.run_id().to_string();
        let pending_id = run.state.pending_id().unwrap_or_default().to_string();
        let action = gate
            .pending()
            .get(&pending_id)
            .filter(|p| p.run_id == run_id)
            .cloned()
            .ok_or_else(|| ApprovalError::NotPending(pending_id.clone()))?;
        let (mut queue, _) = queue_from(&tx, env, clock, key)?;
        let audit_before = queue.audit.len();
        let request = queue.submit_as(&action, rows::new_request_id(&tx)?)?;
        let statement =
            DecisionStatement::new(&request, DeskAction::Approve.verb(), clock.now().as_secs_f64(), approver_key);
        let signed = approver_key.sign(&statement)?;
        signed.verify(&approver, &request, DeskAction::Approve.verb())?;
        let decision = queue.approve(&request.id, &approver.name, gate);
        if decision.code == DecisionCode::Ok {
            rows::put_decision(&tx, &request.id, &signed)?;
        }
        save_queue(&tx, &queue, audit_before, key)?;
        let sealed = Checkpoint::of(run)
            .seal(key)
            .map_err(|source| DeskError::Checkpoint { run_id: run.state.run_id().to_string(), source })?;
        rows::push_checkpoint(&tx, &run_id, run.state.step(), run.state.status().name(), &sealed)?;
        for a in gate.pending().values().filter(|p| p.run_id == run_id) {
            rows::put_pending(&tx, a, key)?;
        }
        rows::push_gate_audit(&tx, gate.audit(), key)?;
        let sent = gate.world().map(|w| w.outbox.sent()).unwrap_or_default();
        let new_mail = sent.get(sent_before..).unwrap_or(&[]).to_vec();
        rows::push_sent(&tx, &run_id, &new_mail, key)?;
        sinks_ok(sinks)?;
        tx.commit().map_err(StoreError::from)?;
        let request = queue.requests.get(&request.id).cloned().unwrap_or(request);
        Ok(CardDecision { request, code: decision.code, outcome: decision.outcome, sent_now: new_mail.len() })
    }

    /// The approver registry: the rows that verify and those set aside.
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn approvers(&self) -> Result<Rows<Approver>, DeskError> {
        rows::bind_key(self.store.conn(), &self.key, false)?;
        Ok(rows::approvers(self.store.conn(), &self.key)?)
    }

    async fn decide_as(&mut self, request_id: &str, who: Actor<'_>, action: DeskAction) -> Result<Decided, DeskError> {
        let Self { store, key, env, clock, sinks } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        let (mut queue, refused) = queue_from(&tx, env, clock, key)?;
        let audit_before = queue.audit.len();
        if let Some(bad) = refused.into_iter().find(|b| b.id == request_id) {
            return Err(DeskError::Quarantined(bad));
        }
        let Some(req) = queue.requests.get(request_id).cloned() else {
            return Ok(Decided { code: DecisionCode::UnknownRequest, run: None, replayed: false, sent_now: 0 });
        };
        let registry = rows::approvers(&tx, key)?;
        let (actor, signed) = identify(who, &req, &registry, action, clock)?;
        let actor = actor.as_str();
        let spec: RunSpec = serde_json::from_str(&rows::run_spec(&tx, &req.run_id, key)?)
            .map_err(|e| StoreError::BadRow { what: format!("run {}", req.run_id), detail: e.to_string() })?;
        if spec.model.starts_with(POLICYPAL_MODEL) {
            return Err(DeskError::NotResumable(req.run_id.clone()));
        }
        // the run continues in the world, policy, prices, prompts and call graph it ran in
        *env = spec.env_over(&req.run_id, env)?;
        let checkpoint = Checkpoint::open(&rows::latest_checkpoint(&tx, &req.run_id)?, key)
            .map_err(|source| DeskError::Checkpoint { run_id: req.run_id.clone(), source })?;
        let sent_before = rows::sent(&tx, key)?.good;
        let config = spec.decided_config(&req.run_id, env)?;
        let mut lab = config.build(env);
        with_outbox(&mut lab, sent_before.clone());
        let pending = rows::pending_of(&tx, Some(&req.run_id), key)?;
        if let Some(bad) = pending.bad.into_iter().next() {
            // a parked action of this run that does not verify: its result or its call
            // cannot be trusted, so nothing of this run is decided
            return Err(DeskError::Quarantined(bad));
        }
        for action in pending.good {
            lab.agent.gate.restore_pending(action);
        }
        lab.agent.restore_memory(checkpoint.state.observations());
        let parked = checkpoint.state.run_id() == req.run_id && checkpoint.state.pending_id() == Some(&req.pending_id);
        if req.status == RequestStatus::Approved && parked {
            // a recorded approval about to run: it must rest on a signed decision for exactly
            // this request and this action, by the registered key of who it names
            recorded_approval(&tx, &registry, &req, &lab.agent.gate)?;
        }
        let before = checkpoint.clone();
        let verdict = match action {
            DeskAction::Approve => Some(ResumeVerdict::Approve),
            DeskAction::Deny => Some(ResumeVerdict::Deny),
            DeskAction::DenyReplan => Some(ResumeVerdict::DenyReplan),
            DeskAction::Cancel => None,
        };
        let resumed = match verdict {
            Some(v) => resume_with_decision(&mut lab.agent, &mut queue, checkpoint, request_id, actor, v).await?,
            None => cancel_waiting(&mut lab.agent, &mut queue, checkpoint, request_id, actor)?,
        };
        save_queue(&tx, &queue, audit_before, key)?;
        if let (DecisionCode::Ok, Some(signed)) = (resumed.code, &signed) {
            rows::put_decision(&tx, request_id, signed)?;
        }
        if resumed.run != before.into_run() {
            let sealed = Checkpoint::of(&resumed.run)
                .seal(key)
                .map_err(|source| DeskError::Checkpoint { run_id: resumed.run.state.run_id().to_string(), source })?;
            let state = &resumed.run.state;
            rows::push_checkpoint(&tx, &req.run_id, state.step(), state.status().name(), &sealed)?;
        }
        for action in lab.agent.gate.pending().values() {
            rows::put_pending(&tx, action, key)?;
        }
        rows::push_gate_audit(&tx, lab.agent.gate.audit(), key)?;
        let new_mail = lab.world.outbox.sent().get(sent_before.len()..).unwrap_or(&[]).to_vec();
        rows::push_sent(&tx, &req.run_id, &new_mail, key)?;
        sinks_ok(sinks)?;
        super::crash_point("decide:before_commit");
        tx.commit().map_err(StoreError::from)?;
        super::crash_point("decide:after_commit");
        Ok(Decided { code: resumed.code, run: Some(resumed.run), replayed: resumed.replayed, sent_now: new_mail.len() })
    }

    /// Every request that verifies, after marking those past their expiry as expired
    /// (written back).
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn requests(&mut self) -> Result<Vec<ApprovalRequest>, DeskError> {
        Ok(self.listing()?.requests)
    }

    /// Every request that verifies (expired ones marked as such first, written back), and
    /// the request rows set aside.
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn listing(&mut self) -> Result<Listing, DeskError> {
        let Self { store, env, clock, key, sinks } = self;
        let tx = store.begin()?;
        rows::bind_key(&tx, key, true)?;
        let (mut queue, refused) = queue_from(&tx, env, clock, key)?;
        let audit_before = queue.audit.len();
        queue.sweep();
        save_queue(&tx, &queue, audit_before, key)?;
        sinks_ok(sinks)?;
        tx.commit().map_err(StoreError::from)?;
        let mut requests: Vec<ApprovalRequest> = queue.requests.into_values().collect();
        requests.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(Listing { requests, refused })
    }

    /// Every e-mail sent that reads back, in order.
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn outbox(&self) -> Result<Vec<SentEmail>, DeskError> {
        rows::bind_key(self.store.conn(), &self.key, false)?;
        Ok(rows::sent(self.store.conn(), &self.key)?.good)
    }

    /// The approval audit lines that read back, in order.
    ///
    /// # Errors
    /// [`DeskError::Store`].
    pub fn audit(&self) -> Result<Vec<AuditLine>, DeskError> {
        rows::bind_key(self.store.conn(), &self.key, false)?;
        Ok(rows::approval_audit(self.store.conn(), &self.key)?.good)
    }

    /// Every row of the store that fails its signature or its schema, table by table
    /// (runs, checkpoints, requests, parked actions, outbox, both audits), read in one
    /// snapshot. Nothing is changed.
    ///
    /// # Errors
    /// [`DeskError::Store`] when the store cannot be read.
    pub fn check(&self) -> Result<Vec<BadRow>, DeskError> {
        let tx = self.store.conn().unchecked_transaction().map_err(StoreError::from)?;
        rows::bind_key(&tx, &self.key, false)?;
        let mut bad = Vec::new();
        for (run_id, spec) in rows::all_runs(&tx, &self.key)? {
            match spec.map(|spec| serde_json::from_str::<RunSpec>(&spec)) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    let detail = format!("the run spec does not read back: {e}");
                    bad.push(BadRow { table: "runs", id: run_id, code: RowCode::BadSchema, detail });
                }
                Err(b) => bad.push(b),
            }
        }
        let checkpoints = rows::all_checkpoints(&tx)?;
        bad.extend(gaps("checkpoints", rows::numbering(&tx, "checkpoints")?));
        for row in checkpoints {
            let id = format!("{}#{}", row.run_id, row.seq);
            match Checkpoint::open(&row.sealed, &self.key) {
                Ok(c) if c.state.run_id() != row.run_id => {
                    let detail = format!("the row holds a checkpoint of {}", c.state.run_id());
                    bad.push(BadRow { table: "checkpoints", id, code: RowCode::BadSchema, detail });
                }
                Ok(c) if i64::from(c.state.step()) != row.step => {
                    bad.push(disagrees("checkpoints", id, "step"));
                }
                Ok(c) if c.state.status().name() != row.status => {
                    bad.push(disagrees("checkpoints", id, "status"));
                }
                Ok(_) => {}
                Err(e) => {
                    let code = match e.code() {
                        Some(CheckpointCode::BadSignature) => RowCode::BadSignature,
                        _ => RowCode::BadSchema,
                    };
                    bad.push(BadRow { table: "checkpoints", id, code, detail: e.to_string() });
                }
            }
        }
        let requests = rows::requests(&tx, &self.key)?;
        let registry = rows::approvers(&tx, &self.key)?;
        for (request_id, json) in rows::all_decisions(&tx)? {
            if let Err(b) = check_decision(&registry, &requests.good, &request_id, &json) {
                bad.push(b);
            }
        }
        bad.extend(registry.bad);
        bad.extend(requests.bad);
        bad.extend(rows::pending_of(&tx, None, &self.key)?.bad);
        bad.extend(rows::sent(&tx, &self.key)?.bad);
        bad.extend(rows::approval_audit(&tx, &self.key)?.bad);
        bad.extend(rows::gate_audit(&tx, &self.key)?.bad);
        bad.extend(super::journal::steps_of(&tx, None, &self.key)?.bad);
        bad.extend(gaps("steps", rows::numbering(&tx, "steps")?));
        bad.extend(super::exchanges::exchanges_of(&tx, None, &self.key)?.bad);
        tx.finish().map_err(StoreError::from)?;
        Ok(bad)
    }

    /// The latest checkpoint of `run_id`, verified.
    ///
    /// # Errors
    /// [`DeskError::Checkpoint`] when it is refused.
    pub fn latest(&self, run_id: &str) -> Result<Checkpoint, DeskError> {
        rows::bind_key(self.store.conn(), &self.key, false)?;
        let text = rows::latest_checkpoint(self.store.conn(), run_id)?;
        Checkpoint::open(&text, &self.key).map_err(|source| DeskError::Checkpoint { run_id: run_id.into(), source })
    }
}
