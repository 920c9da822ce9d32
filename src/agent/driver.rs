//! The controlled loop. Budgets are checked before every model call; the model proposes;
//! the proposal is parsed strictly and checked in code; only then does the gate run a
//! call; every rejection comes back as an observation; every stop has a named reason.
//!
//! One loop serves a fresh run ([`Agent::run`]) and a resumed one ([`Agent::drive`] from a
//! checkpointed state and [`Progress`]), so the two cannot drift apart.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::budget::RunBudget;
use super::proposal::{Proposal, parse_proposal};
use super::state::{AgentState, StateError, Status, StopReason};
use super::trace::{Trace, TraceKind};
use crate::cost::{CostError, Ledger, PriceTable, SharedClock, UsageRecord, estimate_tokens};
use crate::gate::{GateOutcome, Refusal, ToolGate};
use crate::memory::{GuardedMemory, MemoryEffects, SessionMemory};
use crate::model::blocks::push_block;
use crate::model::{Decider, LlmRequest, LlmResponse, Message, ModelError};
use crate::tools::{ToolCall, fact_of, fingerprint};

/// The trusted system prompt of the single-agent loop, `data/prompts/single.txt`.
pub const SINGLE_PROMPT: &str = include_str!("../../data/prompts/single.txt");

/// Errors that end a run without a state (the run could not be carried out at all).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The decider's process died (a crash, not a model failure).
    #[error("model: {0}")]
    Model(ModelError),
    /// A state rule was broken: a bug in the loop, never silently ignored.
    #[error(transparent)]
    State(#[from] StateError),
    /// The model has no price.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// The checkpoint hook could not persist the run.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}

/// Who the run acts for and which tasks they may start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The signed-in user; empty when nobody is signed in.
    pub user_id: String,
    /// Tasks this session may run.
    pub tasks: BTreeSet<String>,
}

impl Session {
    /// A session for `user` allowed `tasks`.
    pub fn new(user: &str, tasks: &[&str]) -> Self {
        Self { user_id: user.to_string(), tasks: tasks.iter().map(|t| (*t).to_string()).collect() }
    }
}

/// How much of the loop's own checking runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckMode {
    /// Every proposal is checked before the gate sees it.
    #[default]
    Full,
    /// The "we trust the model" bug: every proposal is passed as ok. The gate still holds.
    TrustModel,
}

/// What a proposal check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckCode {
    /// May go to the gate (or may finish).
    Ok,
    /// Not in this task's allowlist, or no such tool (the two look the same).
    NotAllowed,
    /// Arguments do not fit the tool's schema.
    InvalidArguments,
    /// The same call already ran in this run.
    RepeatedCall,
    /// A finish without an answer or without successful observations to cite.
    UnsupportedFinish,
}

impl CheckCode {
    /// The code as text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NotAllowed => "not_allowed",
            Self::InvalidArguments => "invalid_arguments",
            Self::RepeatedCall => "repeated_call",
            Self::UnsupportedFinish => "unsupported_finish",
        }
    }
}

/// Everything about a run that is not in its state: what a checkpoint carries besides
/// the state, and what a resumed run continues from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// Tool names of the calls sent to the gate, in order.
    pub calls: Vec<String>,
    /// Fingerprints of those calls (the repeat rule).
    pub seen: BTreeSet<String>,
    /// The trace so far.
    pub trace: Trace,
    /// Usage so far (cost carries across a restart).
    pub ledger: Ledger,
    /// Consecutive bad steps.
    pub bad: u32,
    /// Working time so far; waiting for a person does not count.
    #[serde(with = "super::budget::secs_f64")]
    pub worked: Duration,
    /// The gate's per-tool call counts for this run.
    pub tool_counts: BTreeMap<String, u32>,
}

impl Progress {
    /// Progress of a run that has not started.
    pub fn new(run_id: &str) -> Self {
        Self { trace: Trace::new(run_id), ..Self::default() }
    }
}

/// The result of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The final (or parked) state.
    pub state: AgentState,
    /// Everything else.
    pub progress: Progress,
}

impl Run {
    /// The run's reason (done, needs_approval or the stop reason).
    pub fn reason(&self) -> StopReason {
        self.state.reason().unwrap_or(StopReason::Cancelled)
    }
    /// Tool names sent to the gate, in order.
    pub fn calls(&self) -> &[String] {
        &self.progress.calls
    }
    /// The trace.
    pub fn trace(&self) -> &Trace {
        &self.progress.trace
    }
    /// The usage ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.progress.ledger
    }
}

/// Called at the top of every step with the state and progress so far (where to store a
/// checkpoint is the caller's choice).
pub type StepHook = Box<dyn FnMut(&AgentState, &Progress) -> Result<(), String> + Send>;

/// One agent: a decider, a gate, a session and its limits.
pub struct Agent {
    /// Proposes the next step.
    pub decider: Box<dyn Decider>,
    /// Runs tools; owned by this agent.
    pub gate: ToolGate,
    /// Who the agent acts for.
    pub session: Session,
    /// The task.
    pub task: String,
    /// Limits.
    pub budget: RunBudget,
    /// Working time.
    pub clock: SharedClock,
    /// Prices, for the cost budget and the ledger.
    pub prices: Arc<PriceTable>,
    /// Session memory, if the agent keeps one.
    pub memory: Option<SessionMemory>,
    /// Guarded memory that the `remember` tool writes to (an internal effect), if any.
    pub guarded: Option<GuardedMemory>,
    /// How much of the loop's own checking runs.
    pub checks: CheckMode,
    /// Cancels the run between steps (and abandons a model call in flight).
    pub cancel: CancellationToken,
    /// Checkpoint hooks, called at the top of every step.
    pub on_step: Vec<StepHook>,
    /// The trusted system prompt.
    pub system_prompt: String,
    /// The role this agent plays in a multi-agent run; its trace lines carry it.
    pub trace_role: Option<String>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("task", &self.task).field("session", &self.session).finish_non_exhaustive()
    }
}

enum Step {
    Continue(AgentState),
    End(AgentState),
}

impl Agent {
    /// An agent with default budget, full checks, no memory and no hooks.
    pub fn new(
        decider: Box<dyn Decider>,
        gate: ToolGate,
        session: Session,
        task: &str,
        clock: SharedClock,
        prices: Arc<PriceTable>,
    ) -> Self {
        Self {
            decider,
            gate,
            session,
            task: task.to_string(),
            budget: RunBudget::default(),
            clock,
            prices,
            memory: None,
            guarded: None,
            checks: CheckMode::Full,
            cancel: CancellationToken::new(),
            on_step: Vec::new(),
            system_prompt: SINGLE_PROMPT.to_string(),
            trace_role: None,
        }
    }

    /// Runs `goal` from the start.
    ///
    /// # Errors
    /// [`AgentError`] when the run cannot be carried out (bad goal or run id, a crashed
    /// decider, an unpriced model, a failed checkpoint hook). Every other ending is a
    /// [`Run`] with a named reason.
    pub async fn run(&mut self, goal: &str, run_id: &str) -> Result<Run, AgentError> {
        let state = AgentState::new(run_id, &self.session.user_id, &self.task, goal)?;
        let mut progress = Progress::new(run_id);
        progress.trace.role.clone_from(&self.trace_role);
        if self.session.user_id.is_empty() {
            return self.end(state.stop(StopReason::Unauthenticated)?, progress);
        }
        if !self.session.tasks.contains(&self.task) {
            return self.end(state.stop(StopReason::ForbiddenTask)?, progress);
        }
        if !self.decider.is_free() {
            self.prices.price(self.decider.model())?;
        }
        progress.tool_counts = self.gate.counts_of(run_id);
        self.drive(state, progress).await
    }

    /// Continues a running state: the loop itself, used by fresh and resumed runs.
    ///
    /// # Errors
    /// As [`Agent::run`]; also [`StateError`] when `state` is not running.
    pub async fn drive(&mut self, mut state: AgentState, mut progress: Progress) -> Result<Run, AgentError> {
        if state.status() != &Status::Running {
            return Err(StateError::BadTransition { from: state.status().name(), to: "running (drive)".into() }.into());
        }
        let run_id = state.run_id().to_string();
        self.gate.restore_counts(&run_id, &progress.tool_counts);
        let started = self.clock.now();
        let worked_before = progress.worked;
        let mut cached: Option<LlmRequest> = None;
        loop {
            progress.worked = worked_before + self.clock.now().saturating_sub(started);
            if self.cancel.is_cancelled() {
                return self.end(state.stop(StopReason::Cancelled)?, progress);
            }
            progress.tool_counts = self.gate.counts_of(&run_id);
            for hook in &mut self.on_step {
                hook(&state, &progress).map_err(AgentError::Checkpoint)?;
            }
            let request = self.next_request(&mut cached, &state);
            if let Some(reason) = self.over_budget(&state, request, &progress)? {
                return self.end(state.stop(reason)?, progress);
            }
            state = state.next_step()?;
            match self.step(state, request, &mut progress).await? {
                Step::Continue(s) => state = s,
                Step::End(s) => {
                    progress.worked = worked_before + self.clock.now().saturating_sub(started);
                    return self.end(s, progress);
                }
            }
        }
    }

    async fn step(
        &mut self,
        state: AgentState,
        request: &LlmRequest,
        progress: &mut Progress,
    ) -> Result<Step, AgentError> {
        let step = state.step();
        let cancel = self.cancel.clone();
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            r = self.decider.decide(&state, request) => Some(r),
        };
        let response = match answer {
            None => {
                progress.trace.add(step, TraceKind::Model, "cancelled", "model call abandoned");
                return Ok(Step::End(state.stop(StopReason::Cancelled)?));
            }
            Some(Err(ModelError::Failed { code, message })) => {
                progress.trace.add(step, TraceKind::Model, code, &message);
                return Ok(Step::End(state.stop(StopReason::ModelError)?));
            }
            Some(Err(crash)) => return Err(AgentError::Model(crash)),
            Some(Ok(r)) => r,
        };
        if !self.decider.is_free() {
            progress.ledger.add(self.usage(request, &response, state.run_id())?);
        }
        let parsed = parse_proposal(&response.text);
        let model_code = parsed.as_ref().map_or_else(|e| e.as_str(), |_| "ok");
        progress.trace.add(step, TraceKind::Model, model_code, &response.text);
        let (proposal, code) = match parsed {
            Ok(p) => {
                let code = self.check(&p, &state, &progress.seen);
                progress.trace.add(step, TraceKind::Check, code.as_str(), &format!("{} {}", p.action(), p.tool()));
                (Some(p), code.as_str())
            }
            Err(e) => (None, e.as_str()),
        };
        if code == CheckCode::RepeatedCall.as_str() {
            return Ok(Step::End(state.stop(StopReason::RepeatedCall)?));
        }
        let (state, code) = match proposal {
            Some(Proposal::Finish { answer, sources }) if code == "ok" => {
                return match state.finish(&answer, &sources) {
                    Ok(done) => Ok(Step::End(done)),
                    // only reachable when checks are off: the state itself refuses
                    Err(_) => {
                        let (s, _) = state.observe(false, "rejected", "rejected: unsupported_finish")?;
                        Ok(self.after_bad(s, progress, false)?)
                    }
                };
            }
            Some(Proposal::Call { tool, arguments }) if code == "ok" => {
                if self.cancel.is_cancelled() {
                    return Ok(Step::End(state.stop(StopReason::Cancelled)?));
                }
                let call = ToolCall::new(format!("{}-c{step}", state.run_id()), tool, arguments);
                progress.seen.insert(call.fingerprint());
                progress.calls.push(call.name.clone());
                let outcome = match self.guarded.as_mut() {
                    Some(memory) => {
                        let mut effects = MemoryEffects { memory, observations: state.observations() };
                        let user = &self.session.user_id;
                        self.gate.run_with_async(&call, &self.task, state.run_id(), user, &mut effects).await
                    }
                    None => self.gate.run_async(&call, &self.task, state.run_id(), &self.session.user_id).await,
                };
                progress.trace.add(step, TraceKind::Tool, outcome.code(), &call.name);
                if call.name == "remember" && matches!(outcome, GateOutcome::Ok(_) | GateOutcome::Failed { .. }) {
                    progress.trace.add(step, TraceKind::Memory, outcome.code(), "remember");
                }
                match outcome {
                    GateOutcome::NeedsApproval { pending_id } => return Ok(Step::End(state.wait(&pending_id)?)),
                    GateOutcome::Refused { code: Refusal::CallLimit, .. } => {
                        return Ok(Step::End(state.stop(StopReason::CallLimit)?));
                    }
                    GateOutcome::Ok(data) => {
                        let text = serde_json::to_string(&data).unwrap_or_default();
                        let (s, obs) = state.observe(true, &call.name, &text)?;
                        self.remember(&call.name, &data, &obs.id, step, progress);
                        (s, "ok")
                    }
                    GateOutcome::Refused { code, message } => {
                        let (s, _) =
                            state.observe(false, &call.name, &format!("error {}: {message}", code.as_str()))?;
                        (s, code.as_str())
                    }
                    GateOutcome::Failed { code, message } => {
                        let (s, _) = state.observe(false, &call.name, &format!("error {code}: {message}"))?;
                        (s, code)
                    }
                }
            }
            _ => {
                let (s, _) = state.observe(false, "rejected", &format!("rejected: {code}"))?;
                (s, code)
            }
        };
        self.after_bad(state, progress, code == "ok")
    }

    fn after_bad(&self, state: AgentState, progress: &mut Progress, ok: bool) -> Result<Step, AgentError> {
        progress.bad = if ok { 0 } else { progress.bad + 1 };
        if progress.bad >= self.budget.max_stuck {
            return Ok(Step::End(state.stop(StopReason::Stuck)?));
        }
        Ok(Step::Continue(state))
    }

    fn remember(&mut self, tool: &str, data: &Value, obs_id: &str, step: u32, progress: &mut Progress) {
        if let (Some(memory), Some((key, text))) = (self.memory.as_mut(), fact_of(tool, data)) {
            let code = memory.write(&key, &text, &format!("tool:{tool}:{obs_id}"), None);
            progress.trace.add(step, TraceKind::Memory, code.as_str(), "");
        }
    }

    /// The loop's own check of a proposal, before anything runs.
    pub fn check(&self, p: &Proposal, state: &AgentState, seen: &BTreeSet<String>) -> CheckCode {
        if self.checks == CheckMode::TrustModel {
            return CheckCode::Ok;
        }
        match p {
            Proposal::Finish { answer, sources } => {
                let good: Vec<&str> = state.observations().iter().filter(|o| o.ok).map(|o| o.id.as_str()).collect();
                if !answer.trim().is_empty()
                    && !sources.is_empty()
                    && sources.iter().all(|s| good.contains(&s.as_str()))
                {
                    CheckCode::Ok
                } else {
                    CheckCode::UnsupportedFinish
                }
            }
            Proposal::Call { tool, arguments } => {
                if !self.gate.policy.allows(&self.task, tool) || !self.gate.registry.has(tool) {
                    CheckCode::NotAllowed
                } else if self.gate.registry.validate(tool, arguments).is_err() {
                    CheckCode::InvalidArguments
                } else if seen.contains(&fingerprint(tool, arguments)) {
                    CheckCode::RepeatedCall
                } else {
                    CheckCode::Ok
                }
            }
        }
    }

    fn over_budget(
        &self,
        state: &AgentState,
        request: &LlmRequest,
        progress: &Progress,
    ) -> Result<Option<StopReason>, AgentError> {
        let b = &self.budget;
        if state.step() >= b.max_steps {
            return Ok(Some(StopReason::StepBudget));
        }
        if progress.worked >= b.max_seconds {
            return Ok(Some(StopReason::TimeBudget));
        }
        if !self.decider.is_free() {
            let price = self.prices.price(&request.model)?;
            let worst = price.cost(request.estimated_input_tokens(), u64::from(request.max_tokens));
            if progress.ledger.summary().cost + worst > b.max_cost {
                return Ok(Some(StopReason::CostBudget));
            }
        }
        Ok(None)
    }

    fn usage(&self, request: &LlmRequest, response: &LlmResponse, run_id: &str) -> Result<UsageRecord, AgentError> {
        let (input, output) = match response.usage {
            Some(u) => (u.input_tokens, u.output_tokens),
            None => (request.estimated_input_tokens(), estimate_tokens(&response.text)),
        };
        let price = self.prices.price(&request.model)?;
        Ok(UsageRecord {
            run_id: run_id.into(),
            model: request.model.clone(),
            input_tokens: input,
            output_tokens: output,
            cost: price.cost(input, output),
        })
    }

    /// The request for the next step: trusted rules and tool list, then the goal, memory
    /// and every observation as untrusted, source-tagged blocks.
    pub fn request(&self, state: &AgentState) -> LlmRequest {
        let tools: Vec<_> = self.gate.policy.tools_for(&self.task).filter_map(|t| self.gate.registry.spec(t)).collect();
        let mut system = String::with_capacity(self.system_prompt.len() + 32 + 120 * tools.len());
        system.push_str(&self.system_prompt);
        system.push_str("\nTools for this task:\n");
        for t in &tools {
            system.push_str(&format!("- {}: {} Arguments: {}\n", t.name, t.description, t.parameters["properties"]));
        }
        LlmRequest {
            model: self.decider.model().to_string(),
            messages: vec![Message::system(system), Message::user(self.user_blocks(state))],
            tools,
            max_tokens: self.budget.max_output_tokens,
        }
    }

    /// The request for the next step of a drive: the trusted part (system message, tools)
    /// does not change during a run, so only the untrusted blocks are rebuilt.
    fn next_request<'r>(&self, cached: &'r mut Option<LlmRequest>, state: &AgentState) -> &'r LlmRequest {
        match cached {
            Some(request) => {
                if let Some(user) = request.messages.last_mut() {
                    user.content = self.user_blocks(state);
                }
                request
            }
            None => cached.insert(self.request(state)),
        }
    }

    /// The untrusted part of a request: the goal, memory and every observation as blocks.
    fn user_blocks(&self, state: &AgentState) -> String {
        let mut user = String::with_capacity(256 + state.observations().len() * 256);
        push_block(&mut user, "goal", "user-input", &[], state.goal());
        if let Some(m) = &self.memory {
            for n in m.notes() {
                push_block(&mut user, "memory", &n.source, &[], &n.text);
            }
        }
        if let Some(m) = &self.guarded {
            for n in m.notes() {
                push_block(&mut user, "memory", &n.source, &[], &n.text);
            }
        }
        for o in state.observations() {
            let source = if o.tool == "rejected" {
                format!("loop:rejected:{}", o.id)
            } else {
                format!("tool:{}:{}", o.tool, o.id)
            };
            push_block(
                &mut user,
                "observation",
                &source,
                &[("id", &o.id), ("ok", if o.ok { "true" } else { "false" })],
                &o.text,
            );
        }
        user
    }

    /// Ends a run: the stop line, the final call counts.
    pub(crate) fn end(&self, state: AgentState, mut progress: Progress) -> Result<Run, AgentError> {
        let code = state.reason().map_or("running", StopReason::as_str);
        progress.trace.add(state.step(), TraceKind::Stop, code, &format!("status={}", state.status().name()));
        progress.tool_counts = self.gate.counts_of(state.run_id());
        Ok(Run { state, progress })
    }
}
