//! Durable steps: the one hook every design calls at a step boundary, before the step's
//! effects are visible to the next step. A [`StepSink`] makes the step durable (the store's
//! group-commit writer, `store::StepWriter`) and the caller awaits its acknowledgement
//! before it goes on, so a process that dies loses at most the step in flight.
//!
//! The single loop (and every design built on it: fixed, plan's executor, a role's
//! research loop) calls [`StepSink::agent_step`] at the top of every step with the state
//! and progress so far; PolicyPal calls it at the top of every turn; the plan design and
//! the coordinator call [`StepSink::design_step`] with their own record (the checked plan,
//! an accepted hand-off).

use std::fmt;
use std::sync::Arc;

use super::{AgentState, Progress};
use crate::future::BoxFuture;
use crate::gate::AuditEvent;

/// Where durable steps go. Implementations seal (sign) the record in the caller's task and
/// return a future that resolves once the record is committed.
pub trait StepSink: Send + Sync {
    /// The state and progress of a single-agent loop (or a PolicyPal run) at the top of a
    /// step: a checkpoint the run can continue from; `audit` holds the gate's audit events
    /// since the previous durable step, committed in the same transaction.
    ///
    /// # Errors
    /// Why the step could not be made durable; the run then stops with
    /// `AgentError::Checkpoint`.
    fn agent_step(
        &self,
        state: &AgentState,
        progress: &Progress,
        audit: &[AuditEvent],
    ) -> BoxFuture<'static, Result<(), String>>;

    /// A durable record of another design's step: `kind` names it (`plan`, `handoff`), `step`
    /// numbers it within the run, `body` is its JSON.
    ///
    /// # Errors
    /// As [`StepSink::agent_step`].
    fn design_step(
        &self,
        run_id: &str,
        kind: &'static str,
        step: u32,
        body: String,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// An optional shared [`StepSink`], cheap to clone, that configuration structs can hold
/// (two are equal when they are the same sink).
#[derive(Clone, Default)]
pub struct Durable(Option<Arc<dyn StepSink>>);

impl Durable {
    /// Steps go to `sink`.
    pub fn to(sink: Arc<dyn StepSink>) -> Self {
        Self(Some(sink))
    }

    /// No sink: steps are not made durable (the `exit` durability, or no store).
    pub fn none() -> Self {
        Self(None)
    }

    /// True when steps go to a sink.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Makes the top of a step durable: the record is sealed now, the future resolves
    /// once it is committed (at once without a sink).
    pub fn agent_step(
        &self,
        state: &AgentState,
        progress: &Progress,
        audit: &[AuditEvent],
    ) -> BoxFuture<'static, Result<(), String>> {
        match &self.0 {
            Some(sink) => sink.agent_step(state, progress, audit),
            None => Box::pin(std::future::ready(Ok(()))),
        }
    }

    /// Makes a design's record durable: the future resolves once it is committed (at once
    /// without a sink).
    pub fn design_step(
        &self,
        run_id: &str,
        kind: &'static str,
        step: u32,
        body: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        match &self.0 {
            Some(sink) => sink.design_step(run_id, kind, step, body),
            None => Box::pin(std::future::ready(Ok(()))),
        }
    }
}

impl fmt::Debug for Durable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_on() { "Durable(on)" } else { "Durable(off)" })
    }
}

impl PartialEq for Durable {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Eq for Durable {}
