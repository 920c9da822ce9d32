//! The PolicyPal loop: a bounded agent loop on native tool calling.
//!
//! - Every tool call in one model reply runs (through the gate) before the next model
//!   call, so independent reads cost one turn, not one each.
//! - An exact repeat is not run: it gets an error result that points at the earlier
//!   observation, and the run goes on (a soft repeat, where the single-agent loop stops).
//! - A searching tool answers "no further results" once a run has made
//!   [`SearchGuard::max_searches`] searches.
//! - A tool with an effect (access `write`) stops the loop: the gate parks it and the run
//!   returns a [`Card`] with the exact arguments. [`Pal::confirm`] runs exactly those
//!   arguments without asking the model again; [`Pal::cancel_card`] records "cancelled by
//!   user" as that call's result. Either way the model hears about it on its next turn.
//! - Step, token and deadline budgets are checked before every model call; when one runs
//!   out (or the run is stuck) the user gets [`GIVE_UP`], never a half-finished guess.

mod driver;
mod fakes;

use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::{Design, DesignCode, DesignOutcome};
use crate::agent::Env;
use crate::agent::{Run, Session, StopReason};
use crate::cost::{ManualClock, PriceTable, SharedClock};
use crate::gate::ToolGate;
use crate::model::{LlmClient, Message, SlowClient};
use crate::world::World;

pub use fakes::{PalFake, PalKind};

/// What the user is told when a budget runs out or the run is stuck: an honest hand-off,
/// never a half-finished guess.
pub const GIVE_UP: &str = "I could not answer this reliably within my limits, so I have passed your question \
                           to the help desk.";

/// What the search guard answers once a run has used up its searches.
pub const NO_FURTHER_RESULTS: &str =
    "No further results. If the answer is not in what you already have, say that the policies do not cover it.";

/// The limits of one PolicyPal run. Defaults sit above normal behaviour (most tasks end
/// in two to four steps), so they only stop abnormal runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PalBudget {
    /// Most model calls.
    pub max_steps: u32,
    /// Most tokens (input and output) over the run, checked against the worst case of the
    /// next call.
    pub max_tokens: u64,
    /// Most working time on the injected clock (time waiting for a card does not count).
    pub deadline: Duration,
    /// The output allowance of each model call.
    pub max_output_tokens: u32,
    /// Replies in a row with no successful call and no accepted finish before giving up.
    pub max_stuck: u32,
    /// Most tool calls in one reply; more rejects the whole reply.
    pub max_calls_per_reply: usize,
}

impl Default for PalBudget {
    fn default() -> Self {
        Self {
            max_steps: 6,
            max_tokens: 20_000,
            deadline: Duration::from_secs(20),
            max_output_tokens: 800,
            max_stuck: 2,
            max_calls_per_reply: 5,
        }
    }
}

/// The flailing-search guard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SearchGuard {
    /// Tools that count as searches.
    pub tools: BTreeSet<String>,
    /// Searches a run may make; later ones get [`NO_FURTHER_RESULTS`] and do not run.
    pub max_searches: u32,
}

impl Default for SearchGuard {
    fn default() -> Self {
        Self { tools: BTreeSet::from(["search_documents".to_string()]), max_searches: 3 }
    }
}

/// A side effect waiting for the user: exactly what will run if they confirm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Card {
    /// The parked action in the gate (`pa-N`).
    pub pending_id: String,
    /// The model's id for the call (its result answers this id).
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The exact arguments that will run (the idempotency key is the application's).
    pub arguments: Value,
    /// What the model said alongside the call.
    pub text: String,
}

impl Card {
    /// The card as the user sees it: tool and every argument, one per line.
    pub fn render(&self) -> Vec<String> {
        let mut out = vec![format!("confirm {} ({})?", self.tool, self.pending_id)];
        if let Some(m) = self.arguments.as_object() {
            for (k, v) in m {
                out.push(format!("  {k}: {}", v.as_str().map_or_else(|| v.to_string(), str::to_string)));
            }
        }
        out
    }
}

/// What the user gets back from a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PalReply {
    /// An answer backed by successful observations.
    Answer {
        /// The answer.
        text: String,
        /// The observations it cites.
        sources: Vec<String>,
    },
    /// A side effect waiting for the user's decision.
    Confirm(Card),
    /// A budget ran out, the run was stuck or it was cancelled: the honest hand-off.
    GaveUp {
        /// Always [`GIVE_UP`].
        message: String,
        /// Why.
        reason: StopReason,
    },
}

/// One PolicyPal run, finished or waiting on a card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PalRun {
    /// State, trace, ledger and calls (the same shape every design's run has).
    pub run: Run,
    /// The conversation: system, goal, then assistant replies and tool results.
    pub messages: Vec<Message>,
    /// What the user is told.
    pub reply: PalReply,
    /// Fingerprint of each call that reached the gate → the observation holding its result.
    pub earlier: BTreeMap<String, String>,
}

impl PalRun {
    /// The card, when the run waits on one.
    pub fn card(&self) -> Option<&Card> {
        match &self.reply {
            PalReply::Confirm(c) => Some(c),
            _ => None,
        }
    }

    /// The run as a design outcome (`emails` is left at 0: the outbox belongs to the lab;
    /// [`run_design`](crate::design::run_design) fills it in).
    pub fn outcome(&self) -> DesignOutcome {
        let s = self.run.ledger().summary();
        let answer = match &self.reply {
            PalReply::Answer { text, .. } => text.clone(),
            PalReply::Confirm(c) => c.render().join("\n"),
            PalReply::GaveUp { message, .. } => message.clone(),
        };
        DesignOutcome {
            design: Design::PolicyPal,
            code: DesignCode::Run(self.run.reason()),
            calls: self.run.calls().to_vec(),
            model_calls: s.calls,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            credits: s.cost,
            steps: self.run.state.step(),
            problems: Vec::new(),
            emails: 0,
            answer: Some(answer),
            trace: self.run.trace().clone(),
            run: Some(self.run.clone()),
            multi: None,
        }
    }
}

/// The PolicyPal agent: a model client, a gate, a session and its limits.
pub struct Pal {
    /// The model; owned by this agent and dropped with it.
    pub client: Box<dyn LlmClient>,
    /// Runs tools; the only place one runs.
    pub gate: ToolGate,
    /// Who the agent acts for.
    pub session: Session,
    /// The task (its allowlist is the tool list the model sees).
    pub task: String,
    /// Limits.
    pub budget: PalBudget,
    /// The search guard; `None` turns it off (to show what it prevents).
    pub search_guard: Option<SearchGuard>,
    /// Working time.
    pub clock: SharedClock,
    /// Prices (every model needs one).
    pub prices: Arc<PriceTable>,
    /// Cancels the run: checked before each model call, abandons a call in flight, and a
    /// reply that arrives after it runs none of its calls.
    pub cancel: CancellationToken,
    /// The trusted system prompt.
    pub system_prompt: String,
    /// Makes the top of every turn durable (a checkpoint of state and progress), awaited
    /// before the model is asked.
    pub durable: crate::agent::Durable,
    /// The longest goal a run takes, in characters (the default 300 when `None`; up to
    /// [`MAX_GOAL_LIMIT`](crate::agent::MAX_GOAL_LIMIT), for a benchmark's long requests).
    pub goal_chars: Option<usize>,
    /// The most characters of a tool result the model is shown (the default 400 when
    /// `None`; up to [`MAX_OBSERVATION_LIMIT`](crate::agent::MAX_OBSERVATION_LIMIT)).
    pub observation_chars: Option<usize>,
}

impl Pal {
    /// Asks the model of `config` instead of the fake; the deadline then counts real
    /// (tokio) time, since a server's latency is real.
    pub fn use_model(&mut self, config: &crate::model::http::HttpConfig) {
        self.client = Box::new(crate::model::HttpClient::new(config.clone()));
        self.clock = Arc::new(crate::cost::TokioClock::new());
    }
}

impl std::fmt::Debug for Pal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pal").field("task", &self.task).field("session", &self.session).finish_non_exhaustive()
    }
}

/// How to build a PolicyPal agent for a test, a table or the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PalConfig {
    /// The fake model.
    pub kind: PalKind,
    /// The signed-in user.
    pub user: String,
    /// The task (default `helpdesk`).
    pub task: String,
    /// Write tools granted (default `send_email_draft`, so the gate parks it for a card).
    pub grants: Vec<String>,
    /// Limits.
    pub budget: PalBudget,
    /// The search guard.
    pub search_guard: Option<SearchGuard>,
    /// Simulated seconds per model call (on the lab's manual clock), if any.
    pub slow: Option<Duration>,
}

impl PalConfig {
    /// The default config with fake `kind`.
    pub fn new(kind: PalKind) -> Self {
        Self {
            kind,
            user: "kwame".into(),
            task: "helpdesk".into(),
            grants: vec!["send_email_draft".into()],
            budget: PalBudget::default(),
            search_guard: Some(SearchGuard::default()),
            slow: None,
        }
    }

    /// Builds the agent over a fresh world (empty outbox) from `env`.
    pub fn build(&self, env: &Env) -> PalLab {
        let clock = ManualClock::new();
        let world = World::new(env.world.clone());
        let mut policy = env.policy.clone();
        for g in &self.grants {
            policy = policy.with_grant(g);
        }
        let client: Box<dyn LlmClient> = match self.slow {
            Some(per_call) => Box::new(SlowClient { inner: PalFake::new(self.kind), clock: clock.clone(), per_call }),
            None => Box::new(PalFake::new(self.kind)),
        };
        let pal = Pal {
            client,
            gate: ToolGate::new(policy, world.clone()),
            session: Session::new(&self.user, &[self.task.as_str()]),
            task: self.task.clone(),
            budget: self.budget.clone(),
            search_guard: self.search_guard.clone(),
            clock: clock.shared(),
            prices: env.prices.clone(),
            cancel: CancellationToken::new(),
            system_prompt: crate::model::prompts::policypal().to_string(),
            durable: crate::agent::Durable::none(),
            goal_chars: None,
            observation_chars: None,
        };
        PalLab { pal, world, clock }
    }
}

/// A built PolicyPal lab.
#[derive(Debug)]
pub struct PalLab {
    /// The agent.
    pub pal: Pal,
    /// The world (its outbox shows what was sent).
    pub world: World,
    /// The clock the agent and the slow wrapper share.
    pub clock: ManualClock,
}
