//! Agent designs side by side, on the same tasks, through the same gate:
//!
//! - [`Design::Fixed`]: routing rules written by a person, no model ([`fixed`]).
//! - [`Design::Plan`]: one model call writes a [`Plan`], code checks it, [`FixedPlan`]
//!   executes it ([`plan`]).
//! - [`Design::React`]: the single-agent loop, where the model picks each next step from
//!   the last observation ([`Agent`](crate::agent::Agent) with a fake model).
//! - [`Design::PolicyPal`]: the bounded loop with parallel tool calls, soft repeats, a
//!   search guard, confirmation cards and an honest give-up ([`policypal`]).
//! - [`Design::Multi`]: planner, researcher and reviewer behind the coordinator
//!   ([`crate::multi`]), each in its own scope.
//!
//! [`run_design`] runs any of them on one goal, on fakes or, for the model-driven
//! designs, on a real model ([`DesignConfig::model`], [`DesignConfig::roles`]);
//!
//! [`FixedPlan`]: crate::agent::FixedPlan

mod expect;
pub(crate) mod fixed;
mod goal;
pub(crate) mod plan;
pub(crate) mod planners;
pub(crate) mod policypal;
pub(crate) mod tasks;

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::agent::Env;
use crate::agent::FixedPlan;
use crate::agent::{AgentError, Run, StateError, StopReason, Trace};
use crate::cost::{CostError, Ledger, Summary};
use crate::gate::GateError;
use crate::lab::{DeciderSpec, LabConfig};
use crate::model::http::HttpConfig;
use crate::model::{FakeKind, HttpClient};
use crate::multi::{ClaimMode, MultiConfig, MultiEnv, MultiError, MultiReason, MultiRun, RoleSetup};
use rust_decimal::Decimal;

pub use expect::{AnswerExpect, AnswerPattern, Expect, MAX_EXPECT_CHARS, MAX_EXPECT_ITEMS};
pub(crate) use fixed::{default_routes, route};
pub(crate) use plan::{PLAN_STEP, PlanRecord};
pub use plan::{PlanCode, check_plan, parse_plan, plan_then_execute};
pub(crate) use planners::PLAN_FAKE_KINDS;
pub use planners::{PlanFake, PlanFakeKind};
pub use policypal::Card;
pub use policypal::Pal;
pub use policypal::{GIVE_UP, PalBudget, PalConfig, PalKind, PalLab, PalReply, PalRun};
pub use policypal::{NO_FURTHER_RESULTS, PalFake};
pub(crate) use tasks::DesignTask;
pub use tasks::{TaskGroup, bundled_tasks, parse_tasks};

/// Errors of the design module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DesignError {
    /// A run could not be carried out.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A state rule was broken.
    #[error(transparent)]
    State(#[from] StateError),
    /// A model has no price.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// The gate refused a decision on a parked action.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// A task table row that does not fit the schema.
    #[error("{file}:{line}: {message}")]
    Tasks {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The single-versus-three-roles comparison could not be run.
    #[error("single versus three roles: {0}")]
    Compare(Box<DesignError>),
    /// The three-role run could not be carried out.
    #[error(transparent)]
    Multi(#[from] MultiError),
    /// A design name that is not known (or not built yet).
    #[error("unknown design {0:?} (known: single, fixed, plan, policypal, multi)")]
    UnknownDesign(String),
    /// A fake model name this design does not know.
    #[error("{0}")]
    UnknownFake(String),
    /// A decision on a run that shows no confirmation card.
    #[error("this run is not waiting for a confirmation")]
    NoCard,
    /// Somebody other than the run's user tried to decide on its card.
    #[error("only the run's user may decide on its card, not {0:?}")]
    NotYourCard(String),
}

codes! {
    /// An agent design.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum Design {
        /// Routing rules written by a person; no model.
        Fixed = "fixed",
        /// One model call writes a plan; code checks it; a fixed executor runs it.
        Plan = "plan",
        /// The single-agent loop: the model picks each next step (`single` on the command line).
        React = "react",
        /// The PolicyPal loop.
        PolicyPal = "policypal",
        /// Three roles (planner, researcher, reviewer) behind the coordinator.
        Multi = "multi",
    }
}

impl Design {
    /// Every single-agent design, in a fixed order.
    pub const SINGLE_AGENT: [Design; 4] = [Design::Fixed, Design::Plan, Design::React, Design::PolicyPal];

    /// The task a design runs in unless told otherwise. The three roles each run in the
    /// policy task named after them (their scope) and take no other; `researcher`, the
    /// scope that reads, stands for them.
    pub fn default_task(self) -> &'static str {
        match self {
            Self::PolicyPal => "helpdesk",
            Self::Fixed | Self::Plan | Self::React => "triage",
            Self::Multi => "researcher",
        }
    }
}

impl FromStr for Design {
    type Err = DesignError;

    fn from_str(s: &str) -> Result<Self, DesignError> {
        match s {
            "fixed" => Ok(Self::Fixed),
            "plan" => Ok(Self::Plan),
            "single" | "react" => Ok(Self::React),
            "policypal" => Ok(Self::PolicyPal),
            "multi" => Ok(Self::Multi),
            other => Err(DesignError::UnknownDesign(other.to_string())),
        }
    }
}

/// How a design's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DesignCode {
    /// The fixed design has no rule for the goal; nothing ran.
    NoRoute,
    /// The plan failed its checks; nothing ran.
    PlanRejected,
    /// The task needs a tool that no role's scope holds, so the three roles cannot serve
    /// it; nothing ran.
    OutOfScope,
    /// The run ended (or paused) for this reason.
    Run(StopReason),
    /// The three-role run ended for this reason.
    Multi(MultiReason),
}

impl DesignCode {
    /// True when the run ended done (the single-agent loop or the three roles).
    pub fn is_done(self) -> bool {
        matches!(self, Self::Run(StopReason::Done) | Self::Multi(MultiReason::Done))
    }

    /// The code as text: `no_route`, `plan_rejected`, `out_of_scope` or the run's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoRoute => "no_route",
            Self::PlanRejected => "plan_rejected",
            Self::OutOfScope => "out_of_scope",
            Self::Run(r) => r.as_str(),
            Self::Multi(r) => r.as_str(),
        }
    }
}

impl fmt::Display for DesignCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for DesignCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What one design did with one goal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DesignOutcome {
    /// The design.
    pub design: Design,
    /// How it ended.
    pub code: DesignCode,
    /// Tool names sent to the gate, in order.
    pub calls: Vec<String>,
    /// Paid model calls.
    pub model_calls: u64,
    /// Input tokens over all model calls.
    pub input_tokens: u64,
    /// Output tokens over all model calls.
    pub output_tokens: u64,
    /// Credits over all model calls, at the run's prices.
    pub credits: Decimal,
    /// Loop steps (model or plan steps the loop took; model calls over all roles for the
    /// three roles).
    pub steps: u32,
    /// Plan problems (`step 1: not_allowed`); for the three roles, the refused messages
    /// (`planner: invalid_message`); empty otherwise.
    pub problems: Vec<String>,
    /// E-mails actually sent.
    pub emails: usize,
    /// What the user is told: the answer, the give-up message, or the card's summary.
    pub answer: Option<String>,
    /// The decisions, in order (planning lines first, then the run's; the coordinator's
    /// for the three roles, whose own traces are in [`DesignOutcome::multi`]).
    #[serde(serialize_with = "lines")]
    pub trace: Trace,
    /// The run, when one started.
    #[serde(skip)]
    pub run: Option<Run>,
    /// The three-role run, for that design.
    #[serde(skip)]
    pub multi: Option<Box<MultiRun>>,
}

fn lines<S: serde::Serializer>(t: &Trace, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(t.lines())
}

/// `usage    WHO: calls N | input tokens N | output tokens N | credits X`: what one decider
/// (the agent, a design, a role) paid, in the one wording every `run` prints.
pub fn usage_line(who: &str, s: &Summary) -> String {
    format!(
        "usage    {who}: calls {} | input tokens {} | output tokens {} | credits {}",
        s.calls, s.input_tokens, s.output_tokens, s.cost
    )
}

/// The header row over a printed trace (`Trace::lines`: step, kind, code, detail), so a
/// line such as ` 1 memory ok` reads as step 1, a memory read, allowed.
pub const TRACE_HEADER: &str = " # kind   code               detail";

/// The legend under a printed trace: what its kinds and codes mean.
pub const TRACE_LEGEND: &str = "trace: # = step; kind = model (a model call and its parse), check (the loop's check of a proposal), tool (the gate's decision), memory (a note read or written), human (a person's decision), message (a hand-off between roles), stop (why the run ended), plan (a plan and its check); code = ok or the named reason it was refused";

/// `answer (agent output, shown as data): …`, redacted; the first line of a multi-line
/// answer carries the label.
pub fn answer_line(answer: &str) -> String {
    format!("answer (agent output, shown as data): {}", crate::security::redact(answer))
}

/// The lines a three-role run prints: the coordinator's log in its order (every accepted
/// envelope, every refusal, the stop), the refused tool calls, the `outcome:` line, each
/// role's usage, the answer, then the role that failed or stopped the run and why.
pub fn multi_lines(run: &MultiRun) -> Vec<String> {
    let mut lines = Vec::new();
    let mut accepted = run.messages.iter();
    if let Some(coordinator) = run.traces.first() {
        for l in &coordinator.lines {
            if l.code == "ok"
                && l.kind == crate::agent::TraceKind::Message
                && let Some(env) = accepted.next()
            {
                lines.push(format!("accepted {}", env.log_line()));
                continue;
            }
            lines.push(format!("{:<8} {} {}", l.kind.as_str(), l.code, l.detail).trim_end().to_string());
        }
    }
    for d in &run.denied {
        lines.push(format!("denied   {d}"));
    }
    let tools: Vec<String> = run.tools.iter().map(|(r, t)| format!("{r} [{}]", t.join(", "))).collect();
    lines.push(format!(
        "outcome: {} | messages {} | rejected {} | denied {} | role calls {} | rounds {} | tools {} | e-mails {}",
        run.reason,
        run.messages.len(),
        run.rejected.len(),
        run.denied.len(),
        run.role_calls,
        run.rounds,
        tools.join(", "),
        run.emails
    ));
    for (role, u) in &run.usage {
        lines.push(usage_line(&role.to_string(), u));
    }
    if let Some(answer) = &run.answer {
        lines.push(answer_line(answer));
    }
    if let Some(f) = &run.failed {
        lines.push(format!("failed role: {} ({})", f.role, f.detail));
    }
    if let Some(s) = &run.stopped {
        lines.push(format!("stopped role: {s}"));
    }
    lines
}

impl DesignOutcome {
    /// What the design's model calls paid, summed.
    pub fn usage(&self) -> Summary {
        Summary {
            calls: self.model_calls,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost: self.credits,
        }
    }

    /// The lines `run` prints for it (and a durable run keeps as its end): the trace, any
    /// problems, the usage line, the answer, then the one-line summary; for the three
    /// roles, their log and `outcome:` line ([`multi_lines`]).
    pub fn lines(&self) -> Vec<String> {
        if let Some(run) = &self.multi {
            return multi_lines(run);
        }
        let mut lines: Vec<String> = vec![TRACE_HEADER.to_string()];
        lines.extend(self.trace.lines());
        lines.push(TRACE_LEGEND.to_string());
        if !self.problems.is_empty() {
            lines.push(format!("problems: {:?}", self.problems));
        }
        lines.push(usage_line(&self.design.to_string(), &self.usage()));
        if let Some(a) = &self.answer {
            lines.push(answer_line(a));
        }
        lines.push(format!(
            "{} {} calls={:?} model_calls={} input_tokens={} emails={}",
            self.design, self.code, self.calls, self.model_calls, self.input_tokens, self.emails
        ));
        lines
    }

    /// An outcome for a design that ran `run`, plus usage paid before it (a planner).
    pub fn from_run(design: Design, run: Run, before: &Ledger, mut trace: Trace) -> Self {
        let (b, r) = (before.summary(), run.ledger().summary());
        trace.lines.extend(run.trace().lines.iter().cloned());
        Self {
            design,
            code: DesignCode::Run(run.reason()),
            calls: run.calls().to_vec(),
            model_calls: b.calls + r.calls,
            input_tokens: b.input_tokens.saturating_add(r.input_tokens),
            output_tokens: b.output_tokens.saturating_add(r.output_tokens),
            credits: b.cost.saturating_add(r.cost),
            steps: run.state.step(),
            problems: Vec::new(),
            emails: 0,
            answer: run.state.answer().map(str::to_string),
            trace,
            run: Some(run),
            multi: None,
        }
    }

    /// The outcome of a plan its checks refused: nothing ran; only the planner was paid.
    pub fn plan_rejected(out: plan::PlanOutcome) -> Self {
        let s = out.ledger.summary();
        Self {
            design: Design::Plan,
            code: DesignCode::PlanRejected,
            calls: Vec::new(),
            model_calls: s.calls,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            credits: s.cost,
            steps: 0,
            problems: out.problems.iter().map(ToString::to_string).collect(),
            emails: 0,
            answer: None,
            trace: out.trace,
            run: None,
            multi: None,
        }
    }

    /// An outcome for a three-role run: calls are each role's tools in pipeline order, the
    /// model figures are summed over the roles' paid calls.
    pub fn from_multi(run: MultiRun) -> Self {
        let paid = run.usage.values().fold(Summary::default(), |s, u| Summary {
            calls: s.calls + u.calls,
            input_tokens: s.input_tokens.saturating_add(u.input_tokens),
            output_tokens: s.output_tokens.saturating_add(u.output_tokens),
            cost: s.cost.saturating_add(u.cost),
        });
        Self {
            design: Design::Multi,
            code: DesignCode::Multi(run.reason),
            calls: run.tools.values().flatten().cloned().collect(),
            model_calls: paid.calls,
            input_tokens: paid.input_tokens,
            output_tokens: paid.output_tokens,
            credits: paid.cost,
            steps: run.role_calls,
            problems: run.rejected.iter().map(|r| format!("{}: {}", r.sender, r.code)).collect(),
            emails: run.emails,
            answer: run.answer.clone(),
            trace: run.traces.first().cloned().unwrap_or_else(|| Trace::new(&run.run_id)),
            run: None,
            multi: Some(Box::new(run)),
        }
    }

    /// One line of a table: `design code model_calls input_tokens calls`.
    pub fn table_line(&self) -> String {
        let tail = if self.problems.is_empty() { format!("{:?}", self.calls) } else { format!("{:?}", self.problems) };
        format!(
            "{:<9} {:<16} model_calls={} input_tokens={:>4} {tail}",
            self.design, self.code, self.model_calls, self.input_tokens
        )
    }
}

/// Who runs a design, where, and with which fake or model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesignConfig {
    /// The signed-in user.
    pub user: String,
    /// The task; `None` for the design's default ([`Design::default_task`]). The three
    /// roles ignore it: each runs in its own scope.
    pub task: Option<String>,
    /// The fake for the design: a fake model kind (react), a planner kind (plan) or a
    /// PolicyPal kind; ignored by the fixed design and the three roles (see `roles`).
    /// `sensible` works for every design.
    pub fake: String,
    /// A real model for plan (its planner), react and PolicyPal instead of the fake; the
    /// fixed design has no model.
    pub model: Option<HttpConfig>,
    /// The three roles: a fake behaviour or a real model per role.
    pub roles: RoleSetup,
    /// The three roles' claim mode.
    pub claims: ClaimMode,
    /// Write tools granted (PolicyPal grants `send_email_draft` itself, for its cards).
    pub grants: Vec<String>,
    /// The run id.
    pub run_id: String,
    /// Where every step is made durable (a store's step writer); off by default.
    pub durable: crate::agent::Durable,
}

impl Default for DesignConfig {
    fn default() -> Self {
        Self {
            user: "kwame".into(),
            task: None,
            fake: "sensible".into(),
            model: None,
            roles: RoleSetup::default(),
            claims: ClaimMode::default(),
            grants: Vec::new(),
            run_id: "run-1".into(),
            durable: crate::agent::Durable::none(),
        }
    }
}

impl DesignConfig {
    fn lab(&self, design: Design, decider: DeciderSpec) -> LabConfig {
        LabConfig {
            decider,
            user: self.user.clone(),
            task: self.task.clone().unwrap_or_else(|| design.default_task().to_string()),
            grants: self.grants.clone(),
            ..LabConfig::default()
        }
    }
}

/// Runs `design` on `goal` in a fresh world from `env`.
///
/// # Errors
/// [`DesignError`] for an unknown fake, an unpriced model or a run that could not be
/// carried out. Every other ending is an outcome with a named code.
pub async fn run_design(
    design: Design,
    goal: &str,
    env: &Env,
    cfg: &DesignConfig,
) -> Result<DesignOutcome, DesignError> {
    let empty = Ledger::default();
    match design {
        Design::Fixed => {
            let calls = route(goal, &default_routes());
            if calls.is_empty() {
                let mut trace = Trace::new(&cfg.run_id);
                trace.add(0, crate::agent::TraceKind::Stop, "no_route", "no routing rule matches the goal");
                return Ok(DesignOutcome {
                    design,
                    code: DesignCode::NoRoute,
                    calls: Vec::new(),
                    model_calls: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    credits: Decimal::ZERO,
                    steps: 0,
                    problems: Vec::new(),
                    emails: 0,
                    answer: None,
                    trace,
                    run: None,
                    multi: None,
                });
            }
            let mut lab = cfg.lab(design, DeciderSpec::Fixed(FixedPlan::new(calls))).build(env);
            lab.agent.set_durable(cfg.durable.clone());
            let run = lab.agent.run(goal, &cfg.run_id).await?;
            let out = DesignOutcome::from_run(design, run, &empty, Trace::new(&cfg.run_id));
            Ok(DesignOutcome { emails: lab.world.outbox.len(), ..out })
        }
        Design::React => {
            let decider = match &cfg.model {
                Some(http) => DeciderSpec::Http(http.clone()),
                None => DeciderSpec::Fake(cfg.fake.parse::<FakeKind>().map_err(DesignError::UnknownFake)?),
            };
            let mut lab = cfg.lab(design, decider).build(env);
            lab.agent.set_durable(cfg.durable.clone());
            let run = lab.agent.run(goal, &cfg.run_id).await?;
            let out = DesignOutcome::from_run(design, run, &empty, Trace::new(&cfg.run_id));
            Ok(DesignOutcome { emails: lab.world.outbox.len(), ..out })
        }
        Design::Plan => {
            let mut planner: Box<dyn crate::model::LlmClient> = match &cfg.model {
                Some(http) => Box::new(HttpClient::new(http.clone())),
                None => Box::new(PlanFake::new(cfg.fake.parse::<PlanFakeKind>().map_err(DesignError::UnknownFake)?)),
            };
            let mut lab = cfg.lab(design, DeciderSpec::Fixed(FixedPlan::default())).build(env);
            lab.agent.set_durable(cfg.durable.clone());
            let out = plan_then_execute(planner.as_mut(), &mut lab.agent, goal, &cfg.run_id).await?;
            match out.run {
                Some(run) => {
                    let done = DesignOutcome::from_run(design, run, &out.ledger, out.trace);
                    Ok(DesignOutcome { emails: lab.world.outbox.len(), ..done })
                }
                None => Ok(DesignOutcome { emails: lab.world.outbox.len(), ..DesignOutcome::plan_rejected(out) }),
            }
        }
        Design::PolicyPal => {
            let kind: PalKind = match &cfg.model {
                Some(_) => PalKind::Parallel,
                None => cfg.fake.parse().map_err(DesignError::UnknownFake)?,
            };
            let mut pal_cfg = PalConfig::new(kind);
            pal_cfg.user = cfg.user.clone();
            if let Some(t) = &cfg.task {
                pal_cfg.task = t.clone();
            }
            pal_cfg.grants.extend(cfg.grants.iter().cloned());
            let mut lab = pal_cfg.build(env);
            if let Some(http) = &cfg.model {
                lab.pal.use_model(http);
            }
            lab.pal.durable = cfg.durable.clone();
            let pal_run = lab.pal.run(goal, &cfg.run_id).await?;
            Ok(DesignOutcome { emails: lab.world.outbox.len(), ..pal_run.outcome() })
        }
        Design::Multi => {
            let menv = MultiEnv::new(env)?;
            let mcfg = MultiConfig {
                user: cfg.user.clone(),
                claims: cfg.claims,
                durable: cfg.durable.clone(),
                ..MultiConfig::default()
            };
            let run = crate::multi::run(&menv, mcfg, cfg.roles.models(), goal, &cfg.run_id).await?;
            Ok(DesignOutcome::from_multi(run))
        }
    }
}
