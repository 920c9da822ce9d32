//! The lab: builds runs from data and flags. [`LabConfig`] builds a single agent the way the
//! scenario tables, the designs and the examples need it; [`attacks`] is the attack catalog
//! and [`compromised`] the fakes that obey planted payloads; [`table`] is what every data
//! table shares; [`templates`] fills AgentDojo-style attack templates.

pub(crate) mod attacks;
pub(crate) mod compromised;
pub(crate) mod hops;
pub(crate) mod table;
pub(crate) mod templates;
pub(crate) mod transforms;

pub use attacks::{Attack, AttackVerdict, bundled_attacks, parse_catalog};
pub use hops::{Hop, HopCounts, Marker, Propagation};
pub use table::{MAX_REPORTED_ROWS, ScenarioError};
pub(crate) use table::{MAX_ROW_BYTES, read_table, serde_row_error};
pub use templates::{
    Fill, Placeholder, TemplateError, TemplateName, call_of, check_template, fill, filled, generate, goal_of,
};
pub use transforms::{Transform, TransformError, parse_transforms, split_variant_id, variant_id, with_variants};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::{Agent, AgentConfig, CheckMode, Env, RunBudget, Session};
use crate::agent::{Decider, ModelDecider};
use crate::cost::{ManualClock, SharedClock, TokioClock};
use crate::gate::ToolGate;
use crate::memory::SessionMemory;
use crate::model::http::{ConfigError, Endpoint, HttpConfig};
use crate::model::{FakeKind, FakeModel, HttpClient, ModelSpec, ScriptedModel, SlowClient, research_script};
use crate::world::World;

/// What decides the next step of a lab agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant, reason = "a configuration value, built once per run; boxing buys nothing")]
pub enum DeciderSpec {
    /// A fake model.
    Fake(FakeKind),
    /// A fixed plan.
    Fixed(crate::agent::FixedPlan),
    /// A scripted model (e.g. the research script).
    Scripted(ScriptedModel),
    /// The compromised fake: sensible, except that it does what any of these planted
    /// payloads asks as soon as it reads one (see [`compromised`]).
    Compromised(Arc<[attacks::Attack]>),
    /// The compromised fake as a sleeper: instead of acting on a planted payload it
    /// reads, it asks to `remember` the observation that carries it.
    Sleeper(Arc<[attacks::Attack]>),
    /// A model behind an OpenAI-compatible server. The run's clock is then tokio time
    /// (real in the binary), so the time budget counts the server's real latency; `slow`
    /// does not apply.
    Http(HttpConfig),
}

impl DeciderSpec {
    /// The decider a `--model` value selects (`endpoint` is needed for `openai:`).
    ///
    /// # Errors
    /// [`ConfigError::MissingBaseUrl`] for an `openai:` model without an endpoint.
    pub fn from_model(model: &ModelSpec, endpoint: Option<&Endpoint>) -> Result<Self, ConfigError> {
        match (model, model.http_config(endpoint)?) {
            (_, Some(cfg)) => Ok(Self::Http(cfg)),
            (ModelSpec::Fake(kind), None) => Ok(Self::Fake(*kind)),
            (ModelSpec::OpenAi(_), None) => Err(ConfigError::MissingBaseUrl),
        }
    }
}

/// How to build one single agent for a test, an example or a scenario row.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// The decider.
    pub decider: DeciderSpec,
    /// The signed-in user ("" for none).
    pub user: String,
    /// The task.
    pub task: String,
    /// Tasks the session may run (defaults to the task).
    pub session_tasks: Option<Vec<String>>,
    /// Write tools granted.
    pub grants: Vec<String>,
    /// Per-run call limits overriding the policy's.
    pub call_limits: BTreeMap<String, u32>,
    /// Limits.
    pub budget: RunBudget,
    /// Simulated seconds per model call (the slow wrapper), if any.
    pub slow: Option<Duration>,
    /// Keep a session memory (60 s notes).
    pub memory: bool,
    /// Loop checks.
    pub checks: CheckMode,
}

impl Default for LabConfig {
    fn default() -> Self {
        Self {
            decider: DeciderSpec::Fake(FakeKind::Sensible),
            user: "kwame".into(),
            task: "triage".into(),
            session_tasks: None,
            grants: Vec::new(),
            call_limits: BTreeMap::new(),
            budget: RunBudget::default(),
            slow: None,
            memory: true,
            checks: CheckMode::Full,
        }
    }
}

/// A built lab: the agent and handles on what it acts on.
#[derive(Debug)]
pub struct Lab {
    /// The agent.
    pub agent: Agent,
    /// The world (its outbox shows what was sent).
    pub world: World,
    /// The clock the agent and the slow wrapper share (an HTTP decider runs on tokio
    /// time instead, and this clock stays unused).
    pub clock: ManualClock,
}

impl LabConfig {
    /// A config using fake model `kind`.
    pub fn fake(kind: FakeKind) -> Self {
        Self { decider: DeciderSpec::Fake(kind), ..Self::default() }
    }

    /// The research lab: kwame's reply task with `send_email_draft` granted and the
    /// research script (read T-601, look up the returns policy, draft the e-mail, which
    /// parks for a person).
    pub fn research() -> Self {
        Self::scripted(research_script())
    }

    /// The research lab with another script (e.g. its first two proposals only).
    pub fn scripted(script: Vec<String>) -> Self {
        Self {
            decider: DeciderSpec::Scripted(ScriptedModel::new(script)),
            task: "reply".into(),
            grants: vec!["send_email_draft".into()],
            ..Self::default()
        }
    }

    /// Builds the agent over a fresh world (empty outbox) from `env`.
    pub fn build(&self, env: &Env) -> Lab {
        let clock = ManualClock::new();
        let world = World::new(env.world.clone());
        let mut policy = env.policy.clone();
        for g in &self.grants {
            policy = policy.with_grant(g);
        }
        for (tool, n) in &self.call_limits {
            policy = policy.with_limit(tool, *n);
        }
        let gate = ToolGate::new(policy, world.clone());
        let run_clock: SharedClock = match &self.decider {
            DeciderSpec::Http(_) => std::sync::Arc::new(TokioClock::new()),
            _ => clock.shared(),
        };
        let decider: Box<dyn Decider> = match &self.decider {
            DeciderSpec::Fixed(plan) => Box::new(plan.clone()),
            DeciderSpec::Http(cfg) => Box::new(ModelDecider::new(HttpClient::new(cfg.clone()))),
            DeciderSpec::Scripted(model) => Box::new(ModelDecider::new(model.clone())),
            DeciderSpec::Compromised(planted) => {
                Box::new(ModelDecider::new(compromised::CompromisedModel::new(planted.clone())))
            }
            DeciderSpec::Sleeper(planted) => {
                Box::new(ModelDecider::new(compromised::CompromisedModel::sleeper(planted.clone())))
            }
            DeciderSpec::Fake(kind) => match self.slow {
                Some(per_call) => Box::new(ModelDecider::new(SlowClient {
                    inner: FakeModel::new(*kind),
                    clock: clock.clone(),
                    per_call,
                })),
                None => Box::new(ModelDecider::new(FakeModel::new(*kind))),
            },
        };
        let tasks: Vec<&str> = match &self.session_tasks {
            Some(t) => t.iter().map(String::as_str).collect(),
            None => vec![self.task.as_str()],
        };
        let memory = (self.memory && !self.user.is_empty())
            .then(|| SessionMemory::new(&self.user, run_clock.clone(), Duration::from_secs(60)));
        let config = AgentConfig { budget: self.budget.clone(), checks: self.checks, memory, ..AgentConfig::default() };
        let agent = Agent::new(
            decider,
            gate,
            Session::new(&self.user, &tasks),
            &self.task,
            run_clock,
            env.prices.clone(),
            config,
        );
        Lab { agent, world, clock }
    }
}
