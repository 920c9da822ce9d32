//! `AgentState`: the durable facts of one run, as a value. Every transition returns a
//! new state that has been validated again; illegal moves are errors.
//!
//! ```compile_fail,E0616
//! # use rolegate::agent::AgentState;
//! let mut state = AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap();
//! state.step = 9; // fields are private: a state cannot be changed in place
//! ```

use crate::codes::codes;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

use crate::gate::Observation;
use crate::security::clip;
use crate::tools::RecordFact;

/// Most characters of a goal, unless a run sets its own limit
/// ([`AgentState::new_with_goal_chars`]).
pub(crate) const MAX_GOAL_CHARS: usize = 300;
/// The largest limit a run may set on its goal.
pub const MAX_GOAL_LIMIT: usize = 4_000;
/// Most characters of a final answer.
pub const MAX_ANSWER_CHARS: usize = 600;
/// Most characters kept of an observation's text, unless a run sets its own limit
/// ([`AgentState::with_observation_chars`]).
pub(crate) const MAX_OBSERVATION_CHARS: usize = 400;
/// The largest limit a run may set on an observation's text.
pub const MAX_OBSERVATION_LIMIT: usize = 16_000;

codes! {
    /// Why a run ended (or paused). A closed set: the state refuses any other reason.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum StopReason {
        /// Finished with an answer backed by observations.
        Done = "done",
        /// The model proposed a call that already ran.
        RepeatedCall = "repeated_call",
        /// The step budget ran out.
        StepBudget = "step_budget",
        /// The time budget ran out.
        TimeBudget = "time_budget",
        /// The next call could cross the cost budget.
        CostBudget = "cost_budget",
        /// Too many rejected or failed steps in a row.
        Stuck = "stuck",
        /// Parked: a person must decide on a pending action.
        NeedsApproval = "needs_approval",
        /// A tool's per-run call limit was hit.
        CallLimit = "call_limit",
        /// No signed-in user.
        Unauthenticated = "unauthenticated",
        /// The session may not run this task.
        ForbiddenTask = "forbidden_task",
        /// A person refused the pending action.
        Denied = "denied",
        /// Cancelled from outside.
        Cancelled = "cancelled",
        /// The model server failed (the trace names how) and the run stopped cleanly.
        ModelError = "model_error",
    }
}

impl FromStr for StopReason {
    type Err = StateError;

    fn from_str(s: &str) -> Result<Self, StateError> {
        Self::from_code(s).ok_or_else(|| StateError::UnknownReason(s.to_string()))
    }
}

/// A state rule that was broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A move the transition table does not allow.
    #[error("bad transition: {from} -> {to}")]
    BadTransition {
        /// From status.
        from: &'static str,
        /// To status (or a description of the move).
        to: String,
    },
    /// A reason that is not in the closed set.
    #[error("a stopped run needs a known reason, got {0:?}")]
    UnknownReason(String),
    /// The fields do not fit the status or the rules.
    #[error("invalid state: {0}")]
    Invalid(&'static str),
}

/// Where a run stands. Each variant carries exactly the data it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Working.
    Running,
    /// Parked until a person decides on `pending_id`.
    AwaitingApproval {
        /// The parked action.
        pending_id: String,
    },
    /// Finished with an answer and its sources.
    Done {
        /// The answer.
        answer: String,
        /// Ids of successful observations that support it.
        sources: Vec<String>,
    },
    /// Ended for a reason other than done or needs_approval.
    Stopped {
        /// Why.
        reason: StopReason,
    },
}

impl Status {
    /// `running`, `awaiting_approval`, `done` or `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::AwaitingApproval { .. } => "awaiting_approval",
            Status::Done { .. } => "done",
            Status::Stopped { .. } => "stopped",
        }
    }

    fn may_go_to(&self, to: &Status) -> bool {
        matches!(
            (self, to),
            (Status::Running, _) | (Status::AwaitingApproval { .. }, Status::Running | Status::Stopped { .. })
        )
    }
}

/// The flat, serialised shape of a state; every load goes through [`AgentState::try_from`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// Run id.
    pub run_id: String,
    /// The user the run acts for ("" when nobody signed in).
    pub user_id: String,
    /// The task.
    pub task: String,
    /// The goal.
    pub goal: String,
    /// Status name.
    pub status: String,
    /// Step counter.
    pub step: u32,
    /// Observations so far.
    pub observations: Vec<Observation>,
    /// Answer (done only).
    #[serde(default)]
    pub answer: String,
    /// Sources (done only).
    #[serde(default)]
    pub sources: Vec<String>,
    /// Reason (done, awaiting and stopped).
    #[serde(default)]
    pub reason: String,
    /// Pending action (awaiting only).
    #[serde(default)]
    pub pending_id: String,
    /// The run's limit on an observation's text, when it is not the default 400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_chars: Option<u32>,
    /// The run's limit on its goal, when it is not the default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_chars: Option<u32>,
}

/// The durable facts of one run. Raw chat is not in here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawState", into = "RawState")]
pub struct AgentState {
    run_id: String,
    user_id: String,
    task: String,
    goal: String,
    status: Status,
    step: u32,
    observations: Vec<Observation>,
    /// Most characters kept of an observation's text.
    observation_chars: usize,
    /// Most characters of the goal.
    goal_chars: usize,
}

/// True when `text` has more than `max` characters (bytes bound characters from above,
/// so short texts are not counted).
fn longer_than(text: &str, max: usize) -> bool {
    text.len() > max && text.chars().count() > max
}

/// Appends `n` in decimal (what `write!(out, "{n}")` writes, without the formatting
/// machinery: ids are written on every step), by `itoa`, as the coordinator writes
/// envelope ids.
pub(crate) fn push_decimal(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// True when `id` is `o<n>`.
fn is_observation_id(id: &str, n: usize) -> bool {
    id.strip_prefix('o').is_some_and(|d| {
        !d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit()) && d.parse::<usize>().ok() == Some(n)
    })
}

fn valid_run_id(id: &str) -> bool {
    (1..=40).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

const BAD_RUN_ID: &str = "run_id must be 1 to 40 of a-z, 0-9 and -";
const BAD_GOAL: &str = "the goal must be 1 to 300 characters";
const BAD_LONG_GOAL: &str = "the goal must be 1 character to the run's own goal limit";
const BAD_GOAL_LIMIT: &str = "the goal limit must be 300 to 4000 characters";

/// The run id and the goal under the run's goal limit, checked in this order: what a new
/// state can break, and the first checks of loading one.
fn check_run_id_and_goal(run_id: &str, goal: &str, limit: usize) -> Result<(), StateError> {
    if !valid_run_id(run_id) {
        return Err(StateError::Invalid(BAD_RUN_ID));
    }
    if !(MAX_GOAL_CHARS..=MAX_GOAL_LIMIT).contains(&limit) {
        return Err(StateError::Invalid(BAD_GOAL_LIMIT));
    }
    if goal.trim().is_empty() || longer_than(goal, limit) {
        return Err(StateError::Invalid(if limit == MAX_GOAL_CHARS { BAD_GOAL } else { BAD_LONG_GOAL }));
    }
    Ok(())
}
const ANSWER_TOO_LONG: &str = "the answer must be at most 600 characters";
const BAD_OBSERVATION: &str = "observations must be numbered o1, o2, … and come from past steps";
const SOURCE_NOT_OBSERVED: &str = "every source must be a successful observation of this run";
const DONE_NEEDS_SUPPORT: &str = "done needs an answer and the observations that support it";
const AWAITING_NEEDS_ID: &str = "awaiting_approval needs a pending action id";

/// The rules of the `n`th observation (1-based) of a state at `step`.
fn check_observation(o: &Observation, n: usize, step: u32, limit: usize) -> Result<(), StateError> {
    if !is_observation_id(&o.id, n) || o.step > step {
        return Err(StateError::Invalid(BAD_OBSERVATION));
    }
    if longer_than(&o.text, limit) {
        return Err(StateError::Invalid("an observation's text is too long"));
    }
    Ok(())
}

/// Every source must be a successful observation.
fn check_sources(sources: &[String], observations: &[Observation]) -> Result<(), StateError> {
    let good = |s: &String| observations.iter().any(|o| o.ok && o.id == *s);
    if sources.iter().all(good) { Ok(()) } else { Err(StateError::Invalid(SOURCE_NOT_OBSERVED)) }
}

impl TryFrom<RawState> for AgentState {
    type Error = StateError;

    fn try_from(raw: RawState) -> Result<Self, StateError> {
        let invalid = |m| Err(StateError::Invalid(m));
        let goal_chars = raw.goal_chars.map_or(MAX_GOAL_CHARS, |n| usize::try_from(n).unwrap_or(usize::MAX));
        check_run_id_and_goal(&raw.run_id, &raw.goal, goal_chars)?;
        if longer_than(&raw.answer, MAX_ANSWER_CHARS) {
            return invalid(ANSWER_TOO_LONG);
        }
        let limit = match raw.observation_chars.map(|n| usize::try_from(n).unwrap_or(usize::MAX)) {
            None => MAX_OBSERVATION_CHARS,
            Some(n) if (1..=MAX_OBSERVATION_LIMIT).contains(&n) => n,
            Some(_) => return invalid("the observation limit must be 1 to 16000 characters"),
        };
        for (i, o) in raw.observations.iter().enumerate() {
            check_observation(o, i + 1, raw.step, limit)?;
        }
        check_sources(&raw.sources, &raw.observations)?;
        let status = match raw.status.as_str() {
            "running" => {
                if !raw.reason.is_empty()
                    || !raw.pending_id.is_empty()
                    || !raw.answer.is_empty()
                    || !raw.sources.is_empty()
                {
                    return invalid("a running state has no reason, answer, sources or pending action");
                }
                Status::Running
            }
            "done" => {
                if raw.reason != "done"
                    || crate::security::fold(&raw.answer).trim().is_empty()
                    || raw.sources.is_empty()
                    || !raw.pending_id.is_empty()
                {
                    return invalid(DONE_NEEDS_SUPPORT);
                }
                Status::Done { answer: raw.answer, sources: raw.sources }
            }
            "stopped" => {
                let reason: StopReason = raw.reason.parse()?;
                if matches!(reason, StopReason::Done | StopReason::NeedsApproval) {
                    return Err(StateError::UnknownReason(raw.reason));
                }
                if !raw.answer.is_empty() || !raw.sources.is_empty() || !raw.pending_id.is_empty() {
                    return invalid("a stopped state has no answer, sources or pending action");
                }
                Status::Stopped { reason }
            }
            "awaiting_approval" => {
                if raw.reason != "needs_approval"
                    || raw.pending_id.is_empty()
                    || !raw.answer.is_empty()
                    || !raw.sources.is_empty()
                {
                    return invalid(AWAITING_NEEDS_ID);
                }
                Status::AwaitingApproval { pending_id: raw.pending_id }
            }
            _ => return invalid("status must be running, awaiting_approval, done or stopped"),
        };
        Ok(AgentState {
            run_id: raw.run_id,
            user_id: raw.user_id,
            task: raw.task,
            goal: raw.goal,
            status,
            step: raw.step,
            observations: raw.observations,
            observation_chars: limit,
            goal_chars,
        })
    }
}

impl From<AgentState> for RawState {
    fn from(s: AgentState) -> RawState {
        let status = s.status.name().to_string();
        let (answer, sources, reason, pending_id) = match s.status {
            Status::Running => (String::new(), Vec::new(), String::new(), String::new()),
            Status::AwaitingApproval { pending_id } => (String::new(), Vec::new(), "needs_approval".into(), pending_id),
            Status::Done { answer, sources } => (answer, sources, "done".into(), String::new()),
            Status::Stopped { reason } => (String::new(), Vec::new(), reason.as_str().into(), String::new()),
        };
        RawState {
            run_id: s.run_id,
            user_id: s.user_id,
            task: s.task,
            goal: s.goal,
            status,
            step: s.step,
            observations: s.observations,
            answer,
            sources,
            reason,
            pending_id,
            observation_chars: (s.observation_chars != MAX_OBSERVATION_CHARS)
                .then(|| u32::try_from(s.observation_chars).unwrap_or(u32::MAX)),
            goal_chars: (s.goal_chars != MAX_GOAL_CHARS).then(|| u32::try_from(s.goal_chars).unwrap_or(u32::MAX)),
        }
    }
}

impl AgentState {
    /// A new running state at step 0.
    ///
    /// # Errors
    /// [`StateError::Invalid`] for a bad run id or goal.
    ///
    /// The rules are the ones loading applies ([`AgentState::try_from`]), restricted to
    /// what a new state can break: a running state at step 0 has no observations, answer,
    /// sources, reason or pending action, so only the run id and the goal are checked
    /// (in loading's order, with its errors), and no status text is built to be parsed.
    pub fn new(run_id: &str, user_id: &str, task: &str, goal: &str) -> Result<Self, StateError> {
        Self::new_with_goal_chars(run_id, user_id, task, goal, MAX_GOAL_CHARS)
    }

    /// As [`AgentState::new`], with a goal of up to `goal_chars` characters instead of 300
    /// (300 to [`MAX_GOAL_LIMIT`]): for benchmark tasks whose requests are long. The limit
    /// is part of the state: a checkpoint carries it, and loading checks the goal by it.
    ///
    /// # Errors
    /// [`StateError::Invalid`] for a bad run id, a limit out of range or a goal that is
    /// empty or over it.
    pub fn new_with_goal_chars(
        run_id: &str,
        user_id: &str,
        task: &str,
        goal: &str,
        goal_chars: usize,
    ) -> Result<Self, StateError> {
        check_run_id_and_goal(run_id, goal, goal_chars)?;
        Ok(AgentState {
            run_id: run_id.into(),
            user_id: user_id.into(),
            task: task.into(),
            goal: goal.into(),
            status: Status::Running,
            step: 0,
            observations: Vec::new(),
            observation_chars: MAX_OBSERVATION_CHARS,
            goal_chars,
        })
    }

    /// A new running state with a run's own limits where it sets them: the longest goal
    /// ([`AgentState::new_with_goal_chars`]) and the most characters kept of each
    /// observation ([`AgentState::with_observation_chars`]); the defaults where `None`.
    ///
    /// # Errors
    /// As those two.
    pub(crate) fn with_limits(
        (run_id, user_id, task, goal): (&str, &str, &str, &str),
        goal_chars: Option<usize>,
        observation_chars: Option<usize>,
    ) -> Result<Self, StateError> {
        let state = Self::new_with_goal_chars(run_id, user_id, task, goal, goal_chars.unwrap_or(MAX_GOAL_CHARS))?;
        match observation_chars {
            Some(chars) => state.with_observation_chars(chars),
            None => Ok(state),
        }
    }

    /// This (new) state keeping up to `chars` characters of each observation's text
    /// instead of 400: for tools whose results are long (a month of bank transactions).
    /// The limit is part of the state: a checkpoint carries it, a resumed run keeps it.
    ///
    /// # Errors
    /// [`StateError::Invalid`] for 0 or more than [`MAX_OBSERVATION_LIMIT`], or for a
    /// state that already holds observations.
    pub fn with_observation_chars(mut self, chars: usize) -> Result<Self, StateError> {
        if !(1..=MAX_OBSERVATION_LIMIT).contains(&chars) {
            return Err(StateError::Invalid("the observation limit must be 1 to 16000 characters"));
        }
        if !self.observations.is_empty() {
            return Err(StateError::Invalid("the observation limit is set before the first observation"));
        }
        self.observation_chars = chars;
        Ok(self)
    }

    /// Most characters kept of an observation's text.
    pub fn observation_chars(&self) -> usize {
        self.observation_chars
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
    /// The user.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }
    /// The task.
    pub fn task(&self) -> &str {
        &self.task
    }
    /// The goal.
    pub fn goal(&self) -> &str {
        &self.goal
    }
    /// The status.
    pub fn status(&self) -> &Status {
        &self.status
    }
    /// The step counter.
    pub fn step(&self) -> u32 {
        self.step
    }
    /// The observations so far.
    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    /// The reason of a run that is not running: done, needs_approval or the stop reason.
    pub fn reason(&self) -> Option<StopReason> {
        match &self.status {
            Status::Running => None,
            Status::AwaitingApproval { .. } => Some(StopReason::NeedsApproval),
            Status::Done { .. } => Some(StopReason::Done),
            Status::Stopped { reason } => Some(*reason),
        }
    }

    /// The answer, when done.
    pub fn answer(&self) -> Option<&str> {
        match &self.status {
            Status::Done { answer, .. } => Some(answer),
            _ => None,
        }
    }

    /// The cited sources, when done.
    pub fn sources(&self) -> &[String] {
        match &self.status {
            Status::Done { sources, .. } => sources,
            _ => &[],
        }
    }

    /// The parked action, when awaiting approval.
    pub fn pending_id(&self) -> Option<&str> {
        match &self.status {
            Status::AwaitingApproval { pending_id } => Some(pending_id),
            _ => None,
        }
    }

    /// True for done and stopped, which no transition leaves.
    pub fn is_final(&self) -> bool {
        matches!(self.status, Status::Done { .. } | Status::Stopped { .. })
    }

    /// What a move to `status` at `step` (appending `new` to the observations) must pass
    /// besides the transition table: the rules a loaded state passes, restricted to what
    /// the move changes. Everything else was checked when `self` was made (every state is
    /// made by loading or by a move, so every state passed them) and is kept as it is.
    /// The checks run in the order loading runs them, so a move is refused with the error
    /// loading would give.
    fn check_move(&self, status: &Status, step: u32, new: Option<&Observation>) -> Result<(), StateError> {
        let invalid = |m| Err(StateError::Invalid(m));
        if let Status::Done { answer, .. } = status
            && longer_than(answer, MAX_ANSWER_CHARS)
        {
            return invalid(ANSWER_TOO_LONG);
        }
        // the kept observations were numbered and bounded when they were checked; only
        // their steps are compared again when the step changes
        if step != self.step && self.observations.iter().any(|o| o.step > step) {
            return invalid(BAD_OBSERVATION);
        }
        if let Some(o) = new {
            check_observation(o, self.observations.len() + 1, step, self.observation_chars)?;
        }
        match status {
            // no reason, answer, sources or pending action: nothing else to check
            Status::Running => Ok(()),
            // a move that finishes adds no observation
            Status::Done { answer, sources } => self.check_done(answer, sources),
            Status::Stopped { reason } => {
                if matches!(reason, StopReason::Done | StopReason::NeedsApproval) {
                    Err(StateError::UnknownReason(reason.as_str().to_string()))
                } else {
                    Ok(())
                }
            }
            Status::AwaitingApproval { pending_id } => {
                if pending_id.is_empty() {
                    invalid(AWAITING_NEEDS_ID)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// What a move to done checks of its answer and sources (after the answer's length):
    /// every source a successful observation, a non-empty answer (judged folded: an answer
    /// of zero-width characters is no answer) and at least one source.
    fn check_done(&self, answer: &str, sources: &[String]) -> Result<(), StateError> {
        check_sources(sources, &self.observations)?;
        if crate::security::fold(answer).trim().is_empty() || sources.is_empty() {
            Err(StateError::Invalid(DONE_NEEDS_SUPPORT))
        } else {
            Ok(())
        }
    }

    /// The move to `status` at `step`, appending `new`: the transition table, then
    /// [`AgentState::check_move`]. Taking the state by value, the move keeps its strings
    /// and observations without copying them. In debug builds (the tests) every move is
    /// also checked through the whole loading path, and the two must agree.
    fn moved(mut self, status: Status, step: u32, new: Option<Observation>) -> Result<Self, StateError> {
        if !self.status.may_go_to(&status) {
            return Err(StateError::BadTransition { from: self.status.name(), to: status.name().into() });
        }
        let checked = self.check_move(&status, step, new.as_ref());
        #[cfg(debug_assertions)]
        let loaded = {
            let mut next = self.clone();
            next.status = status.clone();
            next.step = step;
            next.observations.extend(new.clone());
            Self::try_from(RawState::from(next))
        };
        // changed where it is: neither the state nor the new status is moved into a closure
        // or a new binding on the way out (each such move copies the whole state)
        let result = match checked {
            Ok(()) => {
                self.status = status;
                self.step = step;
                self.observations.extend(new);
                Ok(self)
            }
            Err(e) => Err(e),
        };
        #[cfg(debug_assertions)]
        assert_eq!(result, loaded, "a move and loading disagree on a state");
        result
    }

    /// The next step (running → running).
    ///
    /// # Errors
    /// [`StateError::BadTransition`] unless running.
    pub fn next_step(&self) -> Result<Self, StateError> {
        self.clone().into_next_step()
    }

    /// As [`AgentState::next_step`], taking the state.
    pub(crate) fn into_next_step(self) -> Result<Self, StateError> {
        if self.status != Status::Running {
            return Err(StateError::BadTransition { from: self.status.name(), to: "running (next step)".into() });
        }
        let step = self.step + 1;
        self.moved(Status::Running, step, None)
    }

    fn observation(&self, ok: bool, tool: &str, text: &str) -> Observation {
        // `o<n>` and a tool name of at most 40 characters: both inline up to 24 bytes
        let mut id = CompactString::const_new("o");
        id.push_str(itoa::Buffer::new().format(self.observations.len() as u64 + 1));
        Observation {
            id,
            step: self.step,
            tool: CompactString::from(clip(tool, 40)),
            ok,
            text: clip(text, self.observation_chars).to_string(),
            fact: None,
        }
    }

    /// Records an observation; returns the new state and the observation.
    ///
    /// # Errors
    /// [`StateError::BadTransition`] unless running.
    pub fn observe(&self, ok: bool, tool: &str, text: &str) -> Result<(Self, Observation), StateError> {
        self.observe_with_fact(ok, tool, text, None)
    }

    /// As [`AgentState::observe`], the observation with `fact`, what the environment read
    /// in the whole result.
    pub(crate) fn observe_with_fact(
        &self,
        ok: bool,
        tool: &str,
        text: &str,
        fact: Option<RecordFact>,
    ) -> Result<(Self, Observation), StateError> {
        let obs = self.observation(ok, tool, text).with_fact(fact);
        let step = self.step;
        Ok((self.clone().moved(Status::Running, step, Some(obs.clone()))?, obs))
    }

    /// As [`AgentState::observe`], taking the state; the observation is its last, with
    /// `fact`, what the environment read in the whole result.
    pub(crate) fn into_observed(
        self,
        ok: bool,
        tool: &str,
        text: &str,
        fact: Option<RecordFact>,
    ) -> Result<Self, StateError> {
        let obs = self.observation(ok, tool, text).with_fact(fact);
        let step = self.step;
        self.moved(Status::Running, step, Some(obs))
    }

    /// Finishes with an answer backed by successful observations.
    ///
    /// # Errors
    /// [`StateError::Invalid`] without an answer, without sources or with a source that is
    /// not a successful observation; [`StateError::BadTransition`] unless running.
    pub fn finish(&self, answer: &str, sources: &[String]) -> Result<Self, StateError> {
        self.clone().into_finished(answer.to_string(), sources.to_vec())
    }

    /// Whether [`AgentState::finish`] would succeed, without making the state (nor a copy
    /// of the answer and sources): the transition table (only a running state finishes),
    /// then what [`AgentState::check_move`] checks of a move to done at the same step, in
    /// its order.
    ///
    /// # Errors
    /// The error [`AgentState::finish`] would give.
    pub(crate) fn may_finish(&self, answer: &str, sources: &[String]) -> Result<(), StateError> {
        if self.status != Status::Running {
            return Err(StateError::BadTransition { from: self.status.name(), to: "done".into() });
        }
        if longer_than(answer, MAX_ANSWER_CHARS) {
            return Err(StateError::Invalid(ANSWER_TOO_LONG));
        }
        self.check_done(answer, sources)
    }

    /// As [`AgentState::finish`], taking the state and the answer and sources it keeps.
    pub(crate) fn into_finished(self, answer: String, sources: Vec<String>) -> Result<Self, StateError> {
        let step = self.step;
        self.moved(Status::Done { answer, sources }, step, None)
    }

    /// Stops for `reason`.
    ///
    /// # Errors
    /// [`StateError::UnknownReason`] for `done` and `needs_approval` (they have their own
    /// moves); [`StateError::BadTransition`] from a final state.
    pub fn stop(&self, reason: StopReason) -> Result<Self, StateError> {
        self.clone().into_stopped(reason)
    }

    /// As [`AgentState::stop`], taking the state.
    pub(crate) fn into_stopped(self, reason: StopReason) -> Result<Self, StateError> {
        let step = self.step;
        self.moved(Status::Stopped { reason }, step, None)
    }

    /// Parks the run until a person decides on `pending_id`.
    ///
    /// # Errors
    /// [`StateError::Invalid`] for an empty id; [`StateError::BadTransition`] unless running.
    pub fn wait(&self, pending_id: &str) -> Result<Self, StateError> {
        self.clone().into_waiting(pending_id)
    }

    /// As [`AgentState::wait`], taking the state.
    pub(crate) fn into_waiting(self, pending_id: &str) -> Result<Self, StateError> {
        let step = self.step;
        self.moved(Status::AwaitingApproval { pending_id: pending_id.to_string() }, step, None)
    }

    /// Resumes a parked run (awaiting_approval → running); legal from no other status.
    ///
    /// # Errors
    /// [`StateError::BadTransition`] unless awaiting approval.
    pub fn resume(&self) -> Result<Self, StateError> {
        if !matches!(self.status, Status::AwaitingApproval { .. }) {
            return Err(StateError::BadTransition { from: self.status.name(), to: "running by resume".into() });
        }
        self.clone().moved(Status::Running, self.step, None)
    }

    /// The status and the observations, taking the state (what a finished run hands on:
    /// a done status's answer and sources move out, not copied).
    pub(crate) fn into_status_and_observations(self) -> (Status, Vec<Observation>) {
        (self.status, self.observations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_formatting_writes_them() {
        let mut numbers = vec![0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, u64::from(u32::MAX), u64::MAX, u64::MAX - 1];
        numbers.extend((0..20).map(|k| 10u64.pow(k)).flat_map(|p| [p - 1, p, p + 1]));
        for n in numbers {
            let mut out = String::from("o");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("o{n}"));
        }
    }

    #[test]
    fn observation_ids_must_be_exactly_o1_o2_and_lengths_count_characters() {
        assert!(is_observation_id("o1", 1) && is_observation_id("o12", 12));
        for (id, n) in [("o+1", 1), ("o01", 1), ("o1 ", 1), ("O1", 1), ("o", 1), ("o2", 1), ("1", 1)] {
            assert!(!is_observation_id(id, n), "{id}");
        }
        let mut raw = RawState::from(AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap());
        raw.step = 1;
        raw.observations.push(Observation::new("o+1", 1, "t", true, "x".into()));
        assert!(AgentState::try_from(raw).is_err());
        assert!(!longer_than(&"é".repeat(MAX_GOAL_CHARS), MAX_GOAL_CHARS));
        assert!(longer_than(&"é".repeat(MAX_GOAL_CHARS + 1), MAX_GOAL_CHARS));
    }

    /// `AgentState::new` as it was: the running state loaded through `try_from`.
    fn new_loaded(run_id: &str, user_id: &str, task: &str, goal: &str) -> Result<AgentState, StateError> {
        AgentState::try_from(RawState {
            run_id: run_id.into(),
            user_id: user_id.into(),
            task: task.into(),
            goal: goal.into(),
            status: "running".into(),
            step: 0,
            observations: Vec::new(),
            answer: String::new(),
            sources: Vec::new(),
            reason: String::new(),
            pending_id: String::new(),
            observation_chars: None,
            goal_chars: None,
        })
    }

    #[test]
    fn a_runs_own_observation_limit_is_kept_checked_and_carried_by_its_state() {
        let long = "x".repeat(1_000);
        let state = AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap().into_next_step().unwrap();
        let (_, default) = state.observe(true, "t", &long).unwrap();
        assert_eq!(default.text.chars().count(), MAX_OBSERVATION_CHARS);
        let wide =
            AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap().with_observation_chars(800).unwrap();
        let (wide, seen) = wide.into_next_step().unwrap().observe(true, "t", &long).unwrap();
        assert_eq!(seen.text.chars().count(), 800);
        // the limit travels with the state, and only a changed one is written
        let raw = RawState::from(wide.clone());
        assert_eq!(raw.observation_chars, Some(800));
        assert_eq!(AgentState::try_from(raw.clone()).unwrap(), wide);
        assert_eq!(RawState::from(state).observation_chars, None);
        // a state whose observation is longer than its own limit, or whose limit is out of range, is refused
        let mut tight = raw.clone();
        tight.observation_chars = None;
        assert!(AgentState::try_from(tight).is_err());
        for bad in [0, 16_001] {
            let mut r = raw.clone();
            r.observation_chars = Some(bad);
            assert!(AgentState::try_from(r).is_err(), "{bad}");
        }
        assert!(
            AgentState::new("r1", "k", "t", "g").unwrap().with_observation_chars(MAX_OBSERVATION_LIMIT + 1).is_err()
        );
    }

    #[test]
    fn a_runs_own_goal_limit_is_checked_and_carried_by_its_state() {
        let request = "é".repeat(650);
        assert!(AgentState::new("r1", "u", "t", &request).is_err(), "300 unless the run says otherwise");
        let long = AgentState::new_with_goal_chars("r1", "u", "t", &request, MAX_GOAL_LIMIT).unwrap();
        assert_eq!(long.goal(), request);
        // the limit travels with the state, and only a changed one is written
        let raw = RawState::from(long.clone());
        assert_eq!(raw.goal_chars, Some(4_000));
        assert_eq!(AgentState::try_from(raw.clone()).unwrap(), long);
        assert_eq!(RawState::from(AgentState::new("r1", "u", "t", "g").unwrap()).goal_chars, None);
        // a goal longer than its state's own limit, or a limit out of range, is refused
        let mut tight = raw.clone();
        tight.goal_chars = None;
        assert!(AgentState::try_from(tight).is_err());
        for bad in [0, 299, 4_001] {
            let mut r = raw.clone();
            r.goal_chars = Some(bad);
            assert!(AgentState::try_from(r).is_err(), "{bad}");
            assert!(AgentState::new_with_goal_chars("r1", "u", "t", "g", bad as usize).is_err(), "{bad}");
        }
        let over = "x".repeat(MAX_GOAL_LIMIT + 1);
        assert!(AgentState::new_with_goal_chars("r1", "u", "t", &over, MAX_GOAL_LIMIT).is_err());
    }

    #[test]
    fn a_new_state_is_the_loaded_running_state_for_every_id_and_goal() {
        let long_id = "r".repeat(41);
        let ids = ["r1", "", "R1", "run-7", "a_b", "é", &long_id, &long_id[..40], "r 1", "0"];
        let goal_300 = "é".repeat(300);
        let goal_301 = "é".repeat(301);
        let goals = ["Check T-601.", "", " ", "\n\t", "\u{3000}", &goal_300, &goal_301, "x", "日本語", "a\u{200B}"];
        let mut refused = 0;
        for id in ids {
            for goal in goals {
                for (user, task) in [("kwame", "triage"), ("", ""), ("ü", "t\n")] {
                    let (new, loaded) = (AgentState::new(id, user, task, goal), new_loaded(id, user, task, goal));
                    assert_eq!(new, loaded, "{id:?} {goal:?}");
                    refused += usize::from(new.is_err());
                }
            }
        }
        assert!(refused > 30 && refused < 300, "{refused}");
    }

    /// `may_finish` as it was: the move to done made on a copy.
    fn may_finish_by_moving(state: &AgentState, answer: &str, sources: &[String]) -> Result<(), StateError> {
        let done = Status::Done { answer: answer.to_string(), sources: sources.to_vec() };
        if !state.status.may_go_to(&done) {
            return Err(StateError::BadTransition { from: state.status.name(), to: done.name().into() });
        }
        state.check_move(&done, state.step, None)
    }

    #[test]
    fn may_finish_answers_as_the_move_to_done_for_every_state_answer_and_sources() {
        let start = AgentState::new("r1", "kwame", "triage", "Check T-601.").unwrap().into_next_step().unwrap();
        let one = start.clone().into_observed(true, "get_ticket", "T-601 is open", None).unwrap();
        let two = one.clone().into_next_step().unwrap().into_observed(false, "rejected", "rejected: x", None).unwrap();
        let states = [
            start.clone(),
            one.clone(),
            two.clone(),
            two.clone().into_stopped(StopReason::Stuck).unwrap(),
            one.clone().into_waiting("p1").unwrap(),
            one.clone().into_finished("T-601 is open.".into(), vec!["o1".into()]).unwrap(),
        ];
        let long = "é".repeat(MAX_ANSWER_CHARS + 1);
        let edge = "é".repeat(MAX_ANSWER_CHARS);
        let answers = ["T-601 is open.", "", " ", "\u{200B}", "\u{FF34}-601", &long, &edge];
        let sources: [&[&str]; 6] = [&[], &["o1"], &["o2"], &["o1", "o2"], &["o3"], &["o1", "o1"]];
        let (mut ok, mut refused) = (0, 0);
        for state in &states {
            for answer in answers {
                for cited in sources {
                    let cited: Vec<String> = cited.iter().map(|s| s.to_string()).collect();
                    let (now, before) = (state.may_finish(answer, &cited), may_finish_by_moving(state, answer, &cited));
                    assert_eq!(now, before, "{:?} {answer:?} {cited:?}", state.status());
                    let finished = state.clone().into_finished(answer.to_string(), cited.clone());
                    assert_eq!(finished.as_ref().map(|_| ()), before.as_ref().map(|_| ()), "{answer:?} {cited:?}");
                    if now.is_ok() { ok += 1 } else { refused += 1 }
                }
            }
        }
        assert!(ok > 3 && refused > 100, "{ok} {refused}");
    }
}
