//! The coordinator actor: one per run, plain code. It owns the run's cancellation token
//! (each role holds a clone of it: cancelling the run cancels every role), the role
//! handles, the budget and the log.
//!
//! A round is three hand-offs: the goal to the planner, the accepted brief to the
//! researcher, the accepted finding to the reviewer. Before each hand-off the coordinator
//! checks [`MultiBudget`]; after it, it waits for the role's answer on the `oneshot` it gave
//! that role (or for cancellation, or for the run's deadline). The answer's sender is the
//! role it asked — the text has no say in it. The text then goes through
//! [`parse_message`] and, for a finding, [`check_support`]; a refusal is recorded as
//! `(sender, code)`. An approving verdict ends the run `done`; a refusing one starts the
//! next round with the verdict's notes.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::budget::{Handoff, MultiBudget, Usage};
use super::envelope::{Body, Envelope, InstructionFilter, RejectCode, Role, parse_message_with};
use super::graph::{CallGraph, EdgeCounts, EdgeRefusal, EdgeTable, installed_call_graph};
use super::roles::{
    Assignment, CallRole, ResearchRole, RoleHandle, RoleReply, RoleReport, RoleStop, Work, Worker, append,
};
use super::routes::{Scopes, next_hop};
use super::support::{ClaimMode, Evidence, check_support};
use super::{Denial, MultiError, MultiReason, MultiRun, Rejection, RoleFailure, RoleStopped};
use crate::agent::Decider;
use crate::agent::Env;
use crate::agent::{Agent, AgentConfig, CheckMode, RunBudget, Session, SharedSystem, Trace, TraceKind};
use crate::cost::{PriceTable, Summary, TokioClock};
use crate::gate::Observation;
use crate::gate::{ApprovalMode, ToolGate};
use crate::label::{IfcMode, Label};
use crate::model::LlmClient;
use crate::tools::Environment;
use crate::tools::mcp::McpServer;
use crate::world::{World, WorldData};

use super::behaviours::{Behaviours, FakePlanner, FakeResearcher, FakeReviewer};

/// What every run shares, read-only: the environment runs start from, prices and the role
/// scopes.
#[derive(Debug)]
pub struct MultiEnv {
    /// The environment every run starts from: each run gets it as new
    /// ([`Environment::fresh`]: the help desk's records with an empty outbox), shared by
    /// its three roles' gates and its intake.
    pub environment: Arc<dyn Environment>,
    /// Prices.
    pub prices: Arc<PriceTable>,
    /// Each role's gate policy.
    pub scopes: Scopes,
    /// The declared call graph every hand-off is checked against.
    pub graph: Arc<CallGraph>,
    /// The researcher's system message, written for the first run and lent to the later
    /// ones (owned here, dropped with the environment).
    pub(crate) researcher_system: Arc<SharedSystem>,
}

impl MultiEnv {
    /// Derives the role scopes from `env`'s policy; the call graph is the one installed for
    /// the process (`--call-graph`), else the bundled one.
    ///
    /// # Errors
    /// [`MultiError::NoScope`] or [`MultiError::WriteInScope`] (see [`Scopes::from_policy`]).
    pub fn new(env: &Env) -> Result<Arc<Self>, MultiError> {
        let graph = match installed_call_graph() {
            Some(g) => g,
            None => CallGraph::bundled()?,
        };
        Self::with_graph(env, graph)
    }

    /// As [`MultiEnv::new`], with `graph` as the call graph.
    ///
    /// # Errors
    /// As [`MultiEnv::new`].
    pub fn with_graph(env: &Env, graph: Arc<CallGraph>) -> Result<Arc<Self>, MultiError> {
        Ok(Self::from_parts(env.world.clone(), env.prices.clone(), Scopes::from_policy(&env.policy)?, graph))
    }

    /// The help desk's records runs start from, when the environment is the help desk.
    pub fn world(&self) -> Option<&Arc<WorldData>> {
        self.environment.as_world().map(|w| &w.data)
    }

    /// An environment of these parts, over the help desk's `world`.
    pub(crate) fn from_parts(
        world: Arc<WorldData>,
        prices: Arc<PriceTable>,
        scopes: Scopes,
        graph: Arc<CallGraph>,
    ) -> Arc<Self> {
        Self::over(Arc::new(World::new(world)), prices, scopes, graph)
    }

    /// An environment of these parts, every run starting from `environment` (any
    /// [`Environment`]: the roles' gates serve its tools, the intake reads its facts and
    /// users).
    pub fn over(
        environment: Arc<dyn Environment>,
        prices: Arc<PriceTable>,
        scopes: Scopes,
        graph: Arc<CallGraph>,
    ) -> Arc<Self> {
        Arc::new(Self { environment, prices, scopes, graph, researcher_system: Arc::default() })
    }
}

/// What the coordinator does after refusing a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnReject {
    /// End the run `rejected_message`.
    #[default]
    Stop,
    /// Ask the same role again (the refused message still counts against the budget).
    Retry,
}

/// How one run is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiConfig {
    /// The signed-in user every role acts for.
    pub user: String,
    /// Strict or free-text claims.
    pub claims: ClaimMode,
    /// The run's limits.
    pub budget: MultiBudget,
    /// What a refusal does.
    pub on_reject: OnReject,
    /// The instruction filter of the intake (on unless a defense experiment turns it off).
    pub filter: InstructionFilter,
    /// What the roles' gates do with a granted write (roles hold none unless their scopes
    /// were widened on purpose).
    pub approval: ApprovalMode,
    /// The information-flow defense: the roles' gates enforce the trusted-action and
    /// confidentiality rules, the intake the confidentiality rule at the routes (labels
    /// are stamped either way). Off by default.
    pub ifc: IfcMode,
    /// Makes every accepted hand-off durable before the next role sees it (and the
    /// researcher's loop steps); off by default.
    pub durable: crate::agent::Durable,
    /// The roles' trusted prompts; `None`: the process's (the help desk's unless
    /// `--prompts` installed others).
    pub prompts: Option<RolePrompts>,
    /// Most characters of a tool result the researcher's loop keeps; `None`: the loop's
    /// default (400).
    pub observation_chars: Option<usize>,
    /// Most characters of the run's goal (the planner's input); `None`: 300. The brief the
    /// researcher works from is held to 300 whatever this is.
    pub goal_chars: Option<usize>,
}

/// The three roles' trusted system prompts, for an environment whose tools are not the
/// help desk's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolePrompts {
    /// The planner's.
    pub planner: &'static str,
    /// The researcher's.
    pub researcher: &'static str,
    /// The reviewer's.
    pub reviewer: &'static str,
}

/// Tools a run's roles get beside their scopes' built-in ones: each server's tools are
/// added to that role's gate (the role's scope must still name and pin them). The servers
/// stop when the run's gates are dropped.
#[derive(Debug, Default)]
pub struct RoleTools {
    /// Servers whose tools the researcher's gate adds.
    pub researcher: Vec<McpServer>,
}

impl Default for MultiConfig {
    fn default() -> Self {
        Self {
            user: "kwame".into(),
            claims: ClaimMode::Strict,
            budget: MultiBudget::default(),
            on_reject: OnReject::Stop,
            filter: InstructionFilter::On,
            approval: ApprovalMode::Required,
            ifc: IfcMode::Off,
            durable: crate::agent::Durable::none(),
            prompts: None,
            observation_chars: None,
            goal_chars: None,
        }
    }
}

/// Each role's model. Any [`LlmClient`] (or, for the researcher's loop, any [`Decider`])
/// fits; the fakes express the scenario rows, [`RoleSetup`](super::RoleSetup) builds them
/// or HTTP clients. When its actor starts, each model is bound to the run's token
/// ([`LlmClient::bind_cancel`]).
pub struct RoleModels {
    /// The planner's model.
    pub planner: Box<dyn LlmClient>,
    /// The researcher's loop's decider.
    pub researcher: Box<dyn Decider>,
    /// The reviewer's model.
    pub reviewer: Box<dyn LlmClient>,
}

impl std::fmt::Debug for RoleModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleModels")
            .field("planner", &self.planner.model())
            .field("researcher", &self.researcher.model())
            .field("reviewer", &self.reviewer.model())
            .finish()
    }
}

impl RoleModels {
    /// The fake models with these behaviours.
    pub fn fakes(b: Behaviours) -> Self {
        Self {
            planner: Box::new(FakePlanner { kind: b.planner }),
            researcher: Box::new(FakeResearcher { kind: b.researcher }),
            reviewer: Box::new(FakeReviewer { kind: b.reviewer }),
        }
    }
}

/// A started run: cancel it, or wait for its result. Dropping the handle before the run
/// finished cancels it (a drop guard, as mini-redis's `DbDropGuard`): the coordinator
/// then ends the run `cancelled` within one step and joins its role tasks, so no run works
/// on with nobody to read its result.
#[derive(Debug)]
pub struct MultiHandle {
    /// The run's id, shared with the coordinator and its roles.
    run_id: Arc<str>,
    /// The run's token; cancelling it ends the run `cancelled` within one step.
    cancel: CancellationToken,
    /// The coordinator's task; taken by [`MultiHandle::finish`].
    join: Option<JoinHandle<MultiRun>>,
}

impl Drop for MultiHandle {
    fn drop(&mut self) {
        if self.join.as_ref().is_some_and(|j| !j.is_finished()) {
            self.cancel.cancel();
        }
    }
}

impl MultiHandle {
    /// Cancels the run (control never waits behind work: the token is outside any inbox).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The run's token.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Waits for the run's result.
    ///
    /// # Errors
    /// [`MultiError::CoordinatorFailed`] if the coordinator's own task failed (a role that
    /// fails ends the run with `role_failed` instead).
    pub async fn finish(mut self) -> Result<MultiRun, MultiError> {
        let Some(join) = self.join.take() else {
            return Err(MultiError::CoordinatorFailed {
                run_id: self.run_id.to_string(),
                detail: "already joined".into(),
            });
        };
        join.await.map_err(|e| MultiError::CoordinatorFailed { run_id: self.run_id.to_string(), detail: e.to_string() })
    }
}

fn valid_run_id(id: &str) -> bool {
    (1..=40).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Starts a run of `goal` on the current tokio runtime: spawns the coordinator, which
/// spawns the three role actors. `cancel` becomes the run's token.
///
/// # Errors
/// [`MultiError::BadGoal`] or [`MultiError::BadRunId`] before anything is spawned.
pub fn start(
    env: &Arc<MultiEnv>,
    cfg: MultiConfig,
    models: RoleModels,
    goal: &str,
    run_id: &str,
    cancel: CancellationToken,
) -> Result<MultiHandle, MultiError> {
    start_with(env, cfg, models, RoleTools::default(), goal, run_id, cancel)
}

/// As [`start`], with `tools` added to the roles' gates (an MCP server's tools for the
/// researcher, say).
///
/// # Errors
/// As [`start`], and [`MultiError::Tools`] when a server's tools cannot be added.
pub fn start_with(
    env: &Arc<MultiEnv>,
    cfg: MultiConfig,
    models: RoleModels,
    tools: RoleTools,
    goal: &str,
    run_id: &str,
    cancel: CancellationToken,
) -> Result<MultiHandle, MultiError> {
    let limit = cfg.goal_chars.unwrap_or(crate::agent::MAX_GOAL_CHARS);
    if goal.trim().is_empty() || goal.chars().count() > limit.min(crate::agent::MAX_GOAL_LIMIT) {
        return Err(MultiError::BadGoal);
    }
    if !valid_run_id(run_id) {
        return Err(MultiError::BadRunId);
    }
    // the only way adding them can fail is a clash between them: found here, before
    // anything is spawned
    let mut probe = crate::tools::ToolSet::new(Arc::new(crate::tools::NoTools));
    for server in &tools.researcher {
        probe.add_mcp(server)?;
    }
    // the run's root span: the coordinator's task runs in it, and each role's turn is
    // opened under it from the assignment (the role actors are tasks of their own)
    let span = crate::spans::run(run_id, "multi");
    // one copy of the run id for the handle, the coordinator and every role
    let run_id: Arc<str> = Arc::from(run_id);
    let setup = Setup {
        env: env.clone(),
        cfg,
        models,
        tools,
        goal: Arc::from(goal),
        run_id: run_id.clone(),
        span: span.clone(),
    };
    // boxed: the task cell then holds a pointer, not the whole state machine (about 1.9 KB),
    // which tokio would otherwise copy each time it moves the future and its stage (spawn,
    // the cell, the finished output): one allocation against some 16 KB of copies a run
    let join = tokio::spawn(Box::pin(coordinate(setup, cancel.clone())).instrument(span));
    Ok(MultiHandle { run_id, cancel, join: Some(join) })
}

/// Starts a run and waits for its result.
///
/// # Errors
/// As [`start`] and [`MultiHandle::finish`].
pub async fn run(
    env: &Arc<MultiEnv>,
    cfg: MultiConfig,
    models: RoleModels,
    goal: &str,
    run_id: &str,
) -> Result<MultiRun, MultiError> {
    start(env, cfg, models, goal, run_id, CancellationToken::new())?.finish().await
}

struct Setup {
    env: Arc<MultiEnv>,
    cfg: MultiConfig,
    models: RoleModels,
    tools: RoleTools,
    goal: Arc<str>,
    run_id: Arc<str>,
    /// The run's root span (disabled when nothing exports spans).
    span: tracing::Span,
}

/// The rules the intake checks a message by: the claim mode and the instruction filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntakeRules {
    /// Strict or free-text claims.
    pub claims: ClaimMode,
    /// The instruction filter.
    pub filter: InstructionFilter,
    /// The information-flow defense (the confidentiality rule at the routes).
    pub ifc: IfcMode,
}

/// Checks a raw text from `sender` completely: [`parse_message`] towards the route
/// table's recipient, then, for a finding, [`check_support`] against the researcher's
/// `observations`. Returns the recipient and the body.
///
/// # Errors
/// The first [`RejectCode`] that applies.
#[cfg(feature = "testkit")]
pub(crate) fn check_message(
    sender: Role,
    text: &str,
    observations: &[Observation],
    claims: ClaimMode,
) -> Result<(Role, Body), RejectCode> {
    check_message_with(sender, text, observations, IntakeRules { claims, ..IntakeRules::default() }, None)
        .map(|(recipient, body, _)| (recipient, body))
}

/// Checks a raw text from `sender` completely under `rules`: [`parse_message`] towards the
/// route table's recipient, then, for a finding, [`check_support`] against the
/// researcher's `observations`. Returns the recipient, the body and, for a finding, the
/// evidence its claim support read (the intake's label for it reads the same facts
/// instead of rebuilding them from the same observations). The facts are `env`'s (the
/// help desk's when `None`).
///
/// # Errors
/// The first [`RejectCode`] that applies.
fn check_message_with(
    sender: Role,
    text: &str,
    observations: &[Observation],
    rules: IntakeRules,
    env: Option<&dyn Environment>,
) -> Result<(Role, Body, Option<Evidence>), RejectCode> {
    let Some((recipient, _)) = next_hop(sender) else { return Err(RejectCode::NoRoute) };
    checked_envelope(sender, recipient, text, observations, rules, env)
        .map(|(body, evidence)| (recipient, body, evidence))
}

/// Checks a raw text `sender` wants delivered to `recipient` (which need not be the
/// route's: a wrong one is `no_route`), as the intake would: [`parse_message`], then claim
/// support for a finding.
///
/// # Errors
/// The first [`RejectCode`] that applies.
pub(crate) fn check_envelope(
    sender: Role,
    recipient: Role,
    text: &str,
    observations: &[Observation],
    rules: IntakeRules,
) -> Result<Body, RejectCode> {
    checked_envelope(sender, recipient, text, observations, rules, None).map(|(body, _)| body)
}

/// [`check_envelope`], with the evidence of `observations` when the body is a finding
/// (claim support built it from `env`'s facts, the help desk's when `None`; it is `None`
/// for every other body).
fn checked_envelope(
    sender: Role,
    recipient: Role,
    text: &str,
    observations: &[Observation],
    rules: IntakeRules,
    env: Option<&dyn Environment>,
) -> Result<(Body, Option<Evidence>), RejectCode> {
    let body = parse_message_with(sender, recipient, text, rules.filter)?;
    let mut evidence = None;
    if let Body::Finding(f) = &body {
        let e = evidence.insert(Evidence::of(env, observations));
        check_support(f, e, rules.claims)?;
    }
    Ok((body, evidence))
}

/// The coordinator's intake: checks every raw text, numbers the accepted envelopes
/// (`m1`, `m2`, …), records refusals as `(sender, code)` and writes one trace line per
/// decision. The sender is always the caller's argument: the channel the text came on.
#[derive(Debug)]
pub struct Intake {
    rules: IntakeRules,
    /// The call graph's compiled table and the messages accepted per edge so far.
    edges: EdgeTable,
    counts: EdgeCounts,
    /// The user the run acts for (shared with the run's roles; none until
    /// [`Intake::with_ifc`]) and the environment whose other users the labels look for and
    /// whose facts claim support reads (until then, the help desk's, rolegate's default).
    user: Option<Arc<str>>,
    world: Option<Arc<dyn Environment>>,
    /// The user's goal: the one text a brief may restate and keep its sender's label (none
    /// until [`Intake::with_goal`]: every brief is then labelled untrusted).
    goal: Option<Arc<str>>,
    /// Accepted envelopes, in order (shared with the roles they are forwarded to).
    pub messages: Vec<Arc<Envelope>>,
    /// Refused messages, in order.
    pub rejected: Vec<Rejection>,
    /// The coordinator's trace.
    pub trace: Trace,
}

impl Intake {
    /// An empty intake for `run_id`.
    pub fn new(run_id: &str, claims: ClaimMode) -> Self {
        let mut trace = Trace::new(run_id);
        trace.role = Some(Role::Coordinator.as_str().into());
        Self {
            rules: IntakeRules { claims, ..IntakeRules::default() },
            edges: EdgeTable::of_routes(),
            counts: EdgeCounts::default(),
            user: None,
            world: None,
            goal: None,
            messages: Vec::with_capacity(3),
            rejected: Vec::new(),
            trace,
        }
    }

    /// This intake with the instruction filter on or off.
    #[must_use]
    pub fn with_filter(mut self, filter: InstructionFilter) -> Self {
        self.rules.filter = filter;
        self
    }

    /// This intake checking every hand-off against `edges` (a call graph's
    /// [`CallGraph::table`]; by default the route table's own edges, no limit).
    #[must_use]
    pub fn with_edges(mut self, edges: EdgeTable) -> Self {
        self.edges = edges;
        self
    }

    /// This intake labelling a brief by whether it restates `goal`, the user's own words (a
    /// brief that says anything else is the planner model's text, and untrusted).
    #[must_use]
    pub fn with_goal(mut self, goal: Arc<str>) -> Self {
        self.goal = Some(goal);
        self
    }

    /// This intake stamping labels for `user` against the other users of `env` (the run's
    /// environment), checking strict claims against the facts `env` reads from the
    /// researcher's results, and enforcing the confidentiality rule at the routes when `ifc`
    /// is on.
    #[must_use]
    pub fn with_ifc(self, ifc: IfcMode, user: &str, env: Arc<dyn Environment>) -> Self {
        self.with_ifc_shared(ifc, Arc::from(user), env)
    }

    /// [`Intake::with_ifc`] with the run's one copy of the user's name.
    #[must_use]
    fn with_ifc_shared(mut self, ifc: IfcMode, user: Arc<str>, world: Arc<dyn Environment>) -> Self {
        self.rules.ifc = ifc;
        self.user = Some(user);
        self.world = Some(world);
        self
    }

    /// Messages received so far, accepted and refused.
    pub fn received(&self) -> u32 {
        u32::try_from(self.messages.len() + self.rejected.len()).unwrap_or(u32::MAX)
    }

    /// Checks `text` from `sender` and, if it passes, wraps it in the next envelope, for a
    /// sender whose model had `context` in view (the join of what the coordinator handed
    /// it and what its gate handed back): the envelope's label is stamped from it
    /// ([`super::labels::stamp`]), and the confidentiality rule at the routes applies when
    /// the defense is on. A caller that does not know the sender's context passes
    /// [`Label::UNTRUSTED`] (fail closed).
    ///
    /// # Errors
    /// The [`RejectCode`] it was refused with (already recorded).
    pub fn accept_labelled(
        &mut self,
        sender: Role,
        text: &str,
        observations: &[Observation],
        round: u32,
        depth: u32,
        context: Label,
    ) -> Result<Arc<Envelope>, RejectCode> {
        let checked = match next_hop(sender) {
            // the edge first (declared, room left), then the message, then what it carries
            Some((to, kind)) => match self.edges.check_route(sender, to, kind, &self.counts) {
                Ok(()) => check_message_with(sender, text, observations, self.rules, self.world.as_deref())
                    .map_err(Refused::Message)
                    .and_then(|(to, body, evidence)| match self.edges.check_body(sender, to, &body) {
                        Ok(()) => Ok((to, body, evidence)),
                        Err(e) => Err(Refused::Edge(kind, e)),
                    }),
                Err(e) => Err(Refused::Edge(kind, e)),
            },
            None => check_message_with(sender, text, observations, self.rules, self.world.as_deref())
                .map_err(Refused::Message),
        };
        // then the label the coordinator stamps, the edge's label rule, and the
        // confidentiality rule at the route; a finding's label reads the evidence its claim
        // support was checked against (the same observations)
        let checked = checked.and_then(|(recipient, body, evidence)| {
            let world = self.world.as_deref();
            let (claims, user) = (self.rules.claims, self.user.as_deref().unwrap_or_default());
            let goal = self.goal.as_deref();
            let label =
                super::labels::stamp(&body, context, observations, evidence.as_ref(), claims, (user, goal), world);
            if next_hop(sender).is_some() {
                self.edges.check_label(sender, recipient, label).map_err(|e| Refused::Edge(body.kind(), e))?;
            }
            super::labels::check_route(label, self.rules.ifc)
                .map(|()| (recipient, body, label))
                .map_err(Refused::Message)
        });
        match checked {
            Ok((recipient, body, label)) => {
                self.edges.count(sender, recipient, &mut self.counts);
                let mut id = compact_str::CompactString::const_new("m");
                id.push_str(itoa::Buffer::new().format(self.messages.len() + 1));
                let env = Envelope { id, sender, recipient, kind: body.kind(), depth, body, label };
                // `mN sender->recipient kind`, N the count in the envelope's id
                let tail = [" ", sender.as_str(), "->", recipient.as_str(), " ", env.kind.as_str()];
                self.trace.add_counted(round, TraceKind::Message, "ok", "m", self.messages.len() + 1, &tail);
                let env = Arc::new(env);
                self.messages.push(env.clone());
                Ok(env)
            }
            Err(refused) => {
                let to = next_hop(sender).map_or(Role::Coordinator, |(r, _)| r);
                let edge = [sender.as_str(), "->", to.as_str()].concat();
                let (code, detail) = match refused {
                    Refused::Message(code) => (code, edge),
                    Refused::Edge(kind, EdgeRefusal::NotDeclared) => {
                        (RejectCode::EdgeNotDeclared, format!("{edge} {kind}: not declared"))
                    }
                    Refused::Edge(kind, EdgeRefusal::Limit(n)) => {
                        (RejectCode::EdgeLimit, format!("{edge} {kind}: limit {n} reached"))
                    }
                    Refused::Edge(kind, EdgeRefusal::Field(f)) => {
                        (RejectCode::FieldNotAllowed, format!("{edge} {kind}: field {f} may not cross"))
                    }
                    Refused::Edge(kind, EdgeRefusal::Label(label)) => {
                        (RejectCode::EdgeLabel, format!("{edge} {kind}: label {label}"))
                    }
                };
                let guardian = match code {
                    RejectCode::InstructionLike => "instruction_filter",
                    RejectCode::UnknownSource | RejectCode::UnsupportedClaim => "claim_support",
                    RejectCode::EdgeNotDeclared
                    | RejectCode::EdgeLimit
                    | RejectCode::FieldNotAllowed
                    | RejectCode::EdgeLabel => "call_graph",
                    RejectCode::OtherUsersData => "information_flow",
                    _ => "intake",
                };
                crate::spans::refused(guardian, crate::spans::Target::Message, code.as_str(), sender.as_str());
                self.trace.add(round, TraceKind::Message, code.as_str(), &detail);
                // kept for a person (the report): hidden characters shown, then redacted
                let shown = crate::security::redact(&crate::security::reveal_hidden(text)).into_owned();
                let text = crate::security::clip(&shown, super::REJECTED_TEXT_CHARS).to_string();
                self.rejected.push(Rejection { sender, code, text });
                Err(code)
            }
        }
    }
}

/// Why the intake refused a text: a check of the message itself, or of the edge it would
/// cross (with the kind the edge was asked to carry).
enum Refused {
    Message(RejectCode),
    Edge(super::envelope::Kind, EdgeRefusal),
}

/// The durable record of one accepted hand-off.
#[derive(serde::Serialize)]
struct HandoffRecord<'a> {
    round: u32,
    depth: u32,
    envelope: &'a Envelope,
    used: &'a Usage,
}

/// The coordinator's state for one run.
struct Coordinator {
    run_id: Arc<str>,
    goal: Arc<str>,
    cfg: MultiConfig,
    /// The run's token; every role holds a clone of it.
    token: CancellationToken,
    /// Planner, researcher, reviewer: the only handles on the role actors (dropped when
    /// the run ends, which closes their inboxes).
    roles: Option<[RoleHandle; 3]>,
    /// Their tasks, joined when the run ends.
    joins: Option<[JoinHandle<RoleReport>; 3]>,
    /// The run's environment, fresh for the run (the help desk: an empty outbox), shared by
    /// the roles' gates and the intake.
    world: Arc<dyn Environment>,
    started: Instant,
    used: Usage,
    intake: Intake,
    denied: Vec<Denial>,
    tools: [Vec<String>; 3],
    /// Paid calls, tokens and credits per role (planner, researcher, reviewer).
    usage: [Summary; 3],
    failed: Option<RoleFailure>,
    /// The role whose own loop stopped the run, and why.
    stopped: Option<RoleStopped>,
    answer: Option<String>,
    /// The run's root span, handed to each role with its work.
    span: tracing::Span,
}

fn slot(role: Role) -> usize {
    match role {
        Role::Planner => 0,
        Role::Researcher => 1,
        _ => 2,
    }
}

/// Spawns the role actors with their scoped gates over one fresh world.
fn spawn_roles(setup: Setup, token: CancellationToken) -> Coordinator {
    let Setup { env, cfg, mut models, tools, goal, run_id, span } = setup;
    // each role holds the run's own token (a clone, not a child: nothing cancels one role
    // alone, and a child costs a node in the token's tree, locked when it is made, dropped
    // and cancelled), bound to its model before the actor starts
    let tokens = [token.clone(), token.clone(), token.clone()];
    let [planner_cancel, researcher_cancel, reviewer_cancel] = tokens;
    models.planner.bind_cancel(&planner_cancel);
    models.researcher.bind_cancel(&researcher_cancel);
    models.reviewer.bind_cancel(&reviewer_cancel);
    let world = env.environment.fresh();
    let gate = |role: Role| {
        // one policy per role for every run (no copy per gate), relabelled only when asked
        let policy = env.scopes.policy(role).cloned().unwrap_or_default().with_approval_shared(cfg.approval);
        let mut gate = ToolGate::over(policy, world.clone());
        gate.set_ifc(cfg.ifc);
        gate
    };
    // one copy of the user for both call roles
    let user: Arc<str> = Arc::from(cfg.user.as_str());
    let prompts = cfg.prompts;
    let call_role = |role: Role, client| {
        let mut call = CallRole::new(role, client, gate(role), env.prices.clone(), user.clone(), run_id.clone());
        if let Some(p) = prompts {
            call.prompt = if role == Role::Planner { p.planner } else { p.reviewer };
        }
        call
    };
    let planner = call_role(Role::Planner, models.planner);
    let reviewer = call_role(Role::Reviewer, models.reviewer);
    let mut researcher_gate = gate(Role::Researcher);
    let mut failed = None;
    for server in &tools.researcher {
        // checked by `start_with` against the same names: cannot clash here
        if let Err(e) = researcher_gate.add_mcp(server) {
            failed = Some(RoleFailure { role: Role::Researcher, detail: e.to_string() });
        }
    }
    // every field named: `AgentConfig::default()` would make a token only to drop it
    let config = AgentConfig {
        budget: RunBudget::default(),
        checks: CheckMode::Full,
        memory: None,
        guarded: None,
        system_prompt: prompts.map_or_else(crate::model::prompts::researcher, |p| p.researcher).into(),
        role: Some(Role::Researcher.as_str().to_string()),
        cancel: researcher_cancel.clone(),
        observation_chars: cfg.observation_chars,
        // its goal is the brief's question, which the message type holds to 300
        goal_chars: None,
    };
    let agent = Agent::new(
        models.researcher,
        researcher_gate,
        Session::new(&cfg.user, &[Role::Researcher.as_str()]),
        Role::Researcher.as_str(),
        Arc::new(TokioClock::new()),
        env.prices.clone(),
        config,
    );
    let mut agent = agent;
    agent.shared_system = Some(env.researcher_system.clone());
    agent.set_durable(cfg.durable.clone());
    let researcher = ResearchRole::new(agent, run_id.clone());
    let (planner, planner_join) = RoleHandle::spawn(Worker::Call(Box::new(planner)), planner_cancel);
    let (researcher, researcher_join) = RoleHandle::spawn(Worker::Research(Box::new(researcher)), researcher_cancel);
    let (reviewer, reviewer_join) = RoleHandle::spawn(Worker::Call(Box::new(reviewer)), reviewer_cancel);
    let intake = Intake::new(&run_id, cfg.claims)
        .with_filter(cfg.filter)
        .with_edges(env.graph.table())
        .with_ifc_shared(cfg.ifc, user, world.clone())
        .with_goal(goal.clone());
    Coordinator {
        run_id,
        goal,
        cfg,
        token,
        roles: Some([planner, researcher, reviewer]),
        joins: Some([planner_join, researcher_join, reviewer_join]),
        world,
        started: Instant::now(),
        used: Usage::default(),
        intake,
        denied: Vec::new(),
        tools: Default::default(),
        usage: Default::default(),
        failed,
        stopped: None,
        answer: None,
        span,
    }
}

async fn coordinate(setup: Setup, token: CancellationToken) -> MultiRun {
    let deadline = tokio::time::sleep(setup.cfg.budget.max_seconds);
    let mut c = spawn_roles(setup, token);
    tokio::pin!(deadline);
    let reason = if c.failed.is_some() { MultiReason::RoleFailed } else { c.drive(deadline.as_mut()).await };
    crate::spans::run_ended(&c.span, reason.as_str());
    // boxed: the finish's state machine is twice the drive's, and the task would
    // otherwise hold room for it from the run's first hand-off to its last
    Box::pin(c.finish(reason)).await
}

impl Coordinator {
    async fn drive(&mut self, mut deadline: Pin<&mut Sleep>) -> MultiReason {
        let mut notes: Option<(String, Label)> = None;
        loop {
            if let Some(stop) = self.check(Handoff::NewRound) {
                return stop;
            }
            self.used.rounds += 1;
            let round = self.used.rounds;
            let (prev, notes_label) = notes.take().map_or((None, Label::TRUSTED), |(n, l)| (Some(n), l));
            let plan = Assignment::Plan { goal: self.goal.clone(), notes: prev, notes_label };
            let brief = match self.exchange(Role::Planner, plan, round, 1, deadline.as_mut()).await {
                Ok(env) => env,
                Err(stop) => return stop,
            };
            let finding =
                match self.exchange(Role::Researcher, Assignment::Research(brief), round, 2, deadline.as_mut()).await {
                    Ok(env) => env,
                    Err(stop) => return stop,
                };
            let verdict = match self
                .exchange(Role::Reviewer, Assignment::Review(finding.clone()), round, 3, deadline.as_mut())
                .await
            {
                Ok(env) => env,
                Err(stop) => return stop,
            };
            match (&verdict.body, &finding.body) {
                (Body::Verdict(v), Body::Finding(f)) if v.approve => {
                    self.answer = Some(f.claim.clone());
                    return MultiReason::Done;
                }
                (Body::Verdict(v), _) => notes = Some((v.notes.clone(), verdict.label)),
                _ => return MultiReason::RejectedMessage,
            }
        }
    }

    fn check(&mut self, next: Handoff) -> Option<MultiReason> {
        if self.token.is_cancelled() {
            return Some(MultiReason::Cancelled);
        }
        self.cfg.budget.before(next, &self.used, self.started.elapsed())
    }

    /// Hands `what` to `role` and turns its answer into an accepted envelope, asking again
    /// after a refusal when the run retries.
    async fn exchange(
        &mut self,
        role: Role,
        what: Assignment,
        round: u32,
        depth: u32,
        mut deadline: Pin<&mut Sleep>,
    ) -> Result<Arc<Envelope>, MultiReason> {
        let mut what = Some(what);
        loop {
            if (role != Role::Planner || what.is_none())
                && let Some(stop) = self.check(Handoff::Within)
            {
                return Err(stop);
            }
            let assignment = match what.take() {
                Some(a) => a,
                None => self.repeat(role)?,
            };
            // what the coordinator itself hands the role joins the role's context
            let handed = match &assignment {
                Assignment::Plan { notes_label, .. } => *notes_label,
                Assignment::Research(env) | Assignment::Review(env) => env.label,
            };
            let remaining = self.cfg.budget.remaining(&self.used, self.started.elapsed());
            let work = Work { what: assignment, remaining, round, span: self.span.clone() };
            let reply = self.ask(role, work, deadline.as_mut()).await?;
            let RoleReply { text, observations, calls, cost, paid, denied, tools, stop, label } = reply;
            self.account(role, calls, cost, paid, denied, tools);
            if let Some(stop) = stop {
                return Err(match stop {
                    RoleStop::Budget(reason) => reason,
                    RoleStop::Own { reason, cause } => {
                        // the run's closing `stop` line names the role and its reason
                        self.stopped = Some(RoleStopped { role, reason, cause });
                        MultiReason::RoleStopped
                    }
                    RoleStop::Failed(detail) => {
                        self.failed = Some(RoleFailure { role, detail });
                        MultiReason::RoleFailed
                    }
                });
            }
            let context = label.join(handed);
            let accepted = self.intake.accept_labelled(role, &text, &observations, round, depth, context);
            self.used.messages = self.intake.received();
            match accepted {
                Ok(env) if self.cfg.durable.is_on() => {
                    // the hand-off is durable before the next role sees it
                    let n = u32::try_from(self.intake.messages.len()).unwrap_or(u32::MAX);
                    let body = HandoffRecord { round, depth, envelope: &env, used: &self.used };
                    let Ok(body) = serde_json::to_string(&body) else { return Err(MultiReason::RoleFailed) };
                    if let Err(e) = self.cfg.durable.design_step(&self.run_id, "handoff", n, body).await {
                        self.failed = Some(RoleFailure { role: Role::Coordinator, detail: format!("checkpoint: {e}") });
                        return Err(MultiReason::RoleFailed);
                    }
                    return Ok(env);
                }
                Ok(env) => return Ok(env),
                Err(_) if self.cfg.on_reject == OnReject::Retry => {}
                Err(_) => return Err(MultiReason::RejectedMessage),
            }
        }
    }

    /// The assignment to repeat after a refusal: the same input as before.
    fn repeat(&self, role: Role) -> Result<Assignment, MultiReason> {
        match role {
            Role::Planner => Ok(Assignment::Plan { goal: self.goal.clone(), notes: None, notes_label: Label::TRUSTED }),
            Role::Researcher | Role::Reviewer => {
                let want = if role == Role::Researcher { Role::Planner } else { Role::Researcher };
                match self.intake.messages.iter().rev().find(|m| m.sender == want) {
                    Some(env) if role == Role::Researcher => Ok(Assignment::Research(env.clone())),
                    Some(env) => Ok(Assignment::Review(env.clone())),
                    None => Err(MultiReason::RejectedMessage),
                }
            }
            Role::Coordinator => Err(MultiReason::RejectedMessage),
        }
    }

    /// Asks one role and waits for its answer, the run's cancellation or its deadline.
    async fn ask(&mut self, role: Role, work: Work, deadline: Pin<&mut Sleep>) -> Result<RoleReply, MultiReason> {
        let Some(handle) = self.roles.as_ref().and_then(|r| r.get(slot(role))) else {
            return Err(MultiReason::RoleFailed);
        };
        let rx = match handle.assign(work) {
            Ok(rx) => rx,
            Err(e) => {
                self.failed = Some(RoleFailure { role, detail: e.to_string() });
                return Err(MultiReason::RoleFailed);
            }
        };
        let mut rx = rx;
        let stop = tokio::select! {
            biased;
            () = self.token.cancelled() => MultiReason::Cancelled,
            () = deadline => MultiReason::TimeBudget,
            answer = &mut rx => return answer.map_err(|_| {
                self.failed = Some(RoleFailure { role, detail: "dropped its reply".into() });
                MultiReason::RoleFailed
            }),
        };
        // an answer that arrived together with the stop still counts (calls, tools,
        // refusals); one that comes later is in the role's report
        if let Ok(reply) = rx.try_recv() {
            self.account(role, reply.calls, reply.cost, reply.paid, reply.denied, reply.tools);
        }
        Err(stop)
    }

    fn account(
        &mut self,
        role: Role,
        calls: u32,
        cost: rust_decimal::Decimal,
        paid: Summary,
        denied: Vec<Denial>,
        tools: Vec<String>,
    ) {
        self.used.role_calls += calls;
        self.used.cost = self.used.cost.saturating_add(cost);
        // the first non-empty list is kept as it is (no copy), later ones appended
        append(&mut self.denied, denied);
        append(&mut self.tools[slot(role)], tools);
        let usage = &mut self.usage[slot(role)];
        usage.calls += paid.calls;
        usage.input_tokens = usage.input_tokens.saturating_add(paid.input_tokens);
        usage.output_tokens = usage.output_tokens.saturating_add(paid.output_tokens);
        usage.cost = usage.cost.saturating_add(paid.cost);
    }

    /// Ends the run: cancels the token (no role keeps working), closes the inboxes, joins
    /// the role tasks and collects their traces and audits.
    async fn finish(mut self, reason: MultiReason) -> MultiRun {
        self.token.cancel();
        // one closing `stop` line: the reason, and for `role_stopped` the role and its own
        // reason (`researcher: model_error`)
        match &self.stopped {
            Some(s) if reason == MultiReason::RoleStopped => self.intake.trace.add_known(
                self.used.rounds,
                TraceKind::Stop,
                reason.as_str(),
                &[s.role.as_str(), ": ", s.reason.as_str()],
            ),
            _ => self.intake.trace.add_known(self.used.rounds, TraceKind::Stop, reason.as_str(), &[]),
        }
        self.roles = None;
        let mut traces = vec![];
        let mut audit = Vec::new();
        for (join, role) in self.joins.take().into_iter().flatten().zip(Role::MODEL_ROLES) {
            // a role that panicked (in its work, or while its actor shut down) reports it;
            // a task that failed outright has only its join error
            let crash = match join.await {
                Ok(report) => {
                    for r in report.late {
                        self.account(role, r.calls, r.cost, r.paid, r.denied, r.tools);
                    }
                    traces.push(report.trace);
                    audit.extend(report.audit.into_iter().map(|e| (role, e)));
                    report.panicked
                }
                Err(e) => {
                    let mut t = Trace::new(&self.run_id);
                    t.role = Some(role.as_str().into());
                    traces.push(t);
                    Some(if e.is_panic() {
                        format!("panicked: {}", crate::unwind::panic_text(e.into_panic().as_ref()))
                    } else {
                        e.to_string()
                    })
                }
            };
            if let Some(detail) = crash {
                match &mut self.failed {
                    Some(f) if f.role == role => f.detail = detail,
                    _ => {
                        let line = format!("{role}: {detail}");
                        self.intake.trace.add(self.used.rounds, TraceKind::Stop, "role_failed", &line);
                    }
                }
            }
        }
        traces.insert(0, std::mem::take(&mut self.intake.trace));
        // inserted one by one: collecting would sort the three entries in a list first
        let mut tools = BTreeMap::new();
        let mut usage = BTreeMap::new();
        for ((role, t), u) in Role::MODEL_ROLES.into_iter().zip(std::mem::take(&mut self.tools)).zip(self.usage) {
            tools.insert(role, t);
            usage.insert(role, u);
        }
        MultiRun {
            run_id: self.run_id.to_string(),
            reason,
            messages: self.intake.messages.into_iter().map(Arc::unwrap_or_clone).collect(),
            rejected: self.intake.rejected,
            denied: self.denied,
            role_calls: self.used.role_calls,
            rounds: self.used.rounds,
            tools,
            cost: self.used.cost,
            usage,
            answer: self.answer,
            failed: self.failed,
            stopped: self.stopped,
            emails: self.world.as_world().map_or(0, |w| w.outbox.len()),
            traces,
            audit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_ids_count_up_and_read_and_print_as_the_string_ids_did() {
        // the envelope as it was declared before its id became a `CompactString`
        #[derive(serde::Serialize)]
        struct Before<'a> {
            id: String,
            sender: Role,
            recipient: Role,
            kind: super::super::envelope::Kind,
            depth: u32,
            body: &'a Body,
            label: Label,
        }
        let mut intake = Intake::new("run-1", ClaimMode::Strict);
        let brief = r#"{"kind":"brief","question":"Status of T-601? \"é\" \u00e9"}"#;
        for n in 1..=120 {
            let env = intake.accept_labelled(Role::Planner, brief, &[], 1, 1, Label::TRUSTED).unwrap();
            assert_eq!(env.id, format!("m{n}"));
            let before = Before {
                id: format!("m{n}"),
                sender: env.sender,
                recipient: env.recipient,
                kind: env.kind,
                depth: env.depth,
                body: &env.body,
                label: env.label,
            };
            assert_eq!(serde_json::to_string(&*env).unwrap(), serde_json::to_string(&before).unwrap());
            assert_eq!(
                env.log_line(),
                format!("m{n} planner -> researcher brief depth=1 {}", crate::security::redact(&env.body.to_text()))
            );
        }
        // a refusal takes no number: the next accepted envelope is the next id
        assert!(intake.accept_labelled(Role::Planner, "prose", &[], 1, 1, Label::TRUSTED).is_err());
        let env = intake.accept_labelled(Role::Planner, brief, &[], 1, 1, Label::TRUSTED).unwrap();
        assert_eq!(env.id, "m121");
        let line = intake.trace.lines.iter().rev().find(|l| l.code == "ok").map(|l| l.detail.to_string());
        assert_eq!(line.as_deref(), Some("m121 planner->researcher brief"));
    }
}
