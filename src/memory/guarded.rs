//! `GuardedMemory`: the model may only point at an observation; the application writes
//! the note.
//!
//! The `remember` tool has a single argument, `from_observation`. The note's key and text
//! are built in code from that observation (the environment's [`Environment::fact`]: in
//! the help desk, a ticket's id and status, nothing else), then pass the [`SessionMemory`]
//! write rules and a per-run write budget. A model-written memory is therefore a pointer,
//! never a sentence the model authored.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::session::{Note, SessionMemory, WriteCode};
use crate::gate::Observation;
use crate::gate::{GateCode, InternalEffects, InternalFailure};
use crate::tools::{Environment, ToolArgs};

codes! {
    /// The outcome of a `remember` request. The first rule that fails decides.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum RememberCode {
        /// Stored.
        Ok = "ok",
        /// No observation with that id in this run.
        UnknownObservation = "unknown_observation",
        /// The observation is a failure (an error text is never a fact).
        FailedObservation = "failed_observation",
        /// The observation holds no fact the application keeps (e.g. a document).
        NoFact = "no_fact",
        /// This run has used its write budget.
        WriteBudget = "write_budget",
        /// Write rule: the key or source is malformed.
        BadKeyOrSource = "bad_key_or_source",
        /// Write rule: about another user (or asked for by someone other than the owner).
        OtherUser = "other_user",
        /// Write rule: nothing to store.
        Empty = "empty",
        /// Write rule: longer than a note may be.
        TooLong = "too_long",
        /// Write rule: holds a secret.
        Secret = "secret",
        /// Write rule: holds personal data.
        PersonalData = "personal_data",
        /// Write rule: reads like an instruction.
        InstructionLike = "instruction_like",
        /// Write rule: holds characters that render as nothing.
        HiddenText = "hidden_text",
        /// Write rule: the memory is full.
        MemoryFull = "memory_full",
    }
}

impl From<WriteCode> for RememberCode {
    fn from(c: WriteCode) -> Self {
        match c {
            WriteCode::Ok => Self::Ok,
            WriteCode::BadKeyOrSource => Self::BadKeyOrSource,
            WriteCode::OtherUser => Self::OtherUser,
            WriteCode::Empty => Self::Empty,
            WriteCode::TooLong => Self::TooLong,
            WriteCode::Secret => Self::Secret,
            WriteCode::PersonalData => Self::PersonalData,
            WriteCode::InstructionLike => Self::InstructionLike,
            WriteCode::HiddenText => Self::HiddenText,
            // the note's source is always the observation it was read from
            WriteCode::UnknownSource => Self::UnknownObservation,
            WriteCode::MemoryFull => Self::MemoryFull,
        }
    }
}

impl From<RememberCode> for GateCode {
    fn from(c: RememberCode) -> Self {
        match c {
            RememberCode::Ok => Self::Ok,
            RememberCode::UnknownObservation => Self::UnknownObservation,
            RememberCode::FailedObservation => Self::FailedObservation,
            RememberCode::NoFact => Self::NoFact,
            RememberCode::WriteBudget => Self::WriteBudget,
            RememberCode::BadKeyOrSource => Self::BadKeyOrSource,
            RememberCode::OtherUser => Self::OtherUser,
            RememberCode::Empty => Self::Empty,
            RememberCode::TooLong => Self::TooLong,
            RememberCode::Secret => Self::Secret,
            RememberCode::PersonalData => Self::PersonalData,
            RememberCode::InstructionLike => Self::InstructionLike,
            RememberCode::HiddenText => Self::HiddenText,
            RememberCode::MemoryFull => Self::MemoryFull,
        }
    }
}

/// A session memory that only the application writes, from observations a model points at.
#[derive(Clone, Debug)]
pub struct GuardedMemory {
    /// The notes and their write rules; owned here, dropped with this memory.
    memory: SessionMemory,
    /// Observations handed in with [`GuardedMemory::on_observation`].
    observations: Vec<Observation>,
    /// Most successful writes per run.
    max_writes: u32,
    /// Successful writes so far.
    writes: u32,
}

impl GuardedMemory {
    /// Guards `memory` with a budget of `max_writes` successful writes.
    pub fn new(memory: SessionMemory, max_writes: u32) -> Self {
        Self { memory, observations: Vec::new(), max_writes, writes: 0 }
    }

    /// The owner of the memory.
    pub fn owner(&self) -> &str {
        self.memory.owner()
    }

    /// Hands in an observation a later `remember` may point at.
    pub fn on_observation(&mut self, observation: Observation) {
        self.observations.push(observation);
    }

    /// Remembers the fact of observation `from` among those handed in.
    pub fn remember(&mut self, from: &str) -> RememberCode {
        let observations = std::mem::take(&mut self.observations);
        let code = self.remember_from(&observations, from);
        self.observations = observations;
        code
    }

    /// Remembers the fact of observation `from` among `observations` (the run's own), read
    /// as the help desk reads its results; a run's gate hands its own environment in.
    pub fn remember_from(&mut self, observations: &[Observation], from: &str) -> RememberCode {
        self.note_from(observations, from, None).0
    }

    /// The note of observation `from`, its fact read by `env` (the help desk when `None`).
    fn note_from(
        &mut self,
        observations: &[Observation],
        from: &str,
        env: Option<&dyn Environment>,
    ) -> (RememberCode, Option<String>) {
        let Some(obs) = observations.iter().find(|o| o.id == from) else {
            return (RememberCode::UnknownObservation, None);
        };
        if !obs.ok {
            return (RememberCode::FailedObservation, None);
        }
        let fact = obs.fact_in(env);
        let Some((key, text)) = fact.and_then(|f| Some((f.memory_key()?, f.text().to_string()))) else {
            return (RememberCode::NoFact, None);
        };
        if self.writes >= self.max_writes {
            return (RememberCode::WriteBudget, None);
        }
        let source = format!("tool:{}:{}", obs.tool, obs.id);
        let code: RememberCode = self.memory.write_observed(&key, &text, &source, None, observations).into();
        if code == RememberCode::Ok {
            self.writes += 1;
            return (code, Some(text));
        }
        (code, None)
    }

    /// Successful writes so far.
    pub fn writes(&self) -> u32 {
        self.writes
    }

    /// The live notes, ordered by key.
    pub fn notes(&self) -> Vec<&Note> {
        self.memory.notes()
    }

    /// The guarded session memory (read-only).
    pub fn memory(&self) -> &SessionMemory {
        &self.memory
    }
}

/// The `remember` tool as an internal effect of the gate: it reads the run's observations
/// and writes to the agent's guarded memory.
#[derive(Debug)]
pub(crate) struct MemoryEffects<'a> {
    /// The memory written to (borrowed from the agent for one call).
    pub memory: &'a mut GuardedMemory,
    /// The run's observations so far (borrowed from its state for one call).
    pub observations: &'a [Observation],
}

impl InternalEffects for MemoryEffects<'_> {
    fn apply(&mut self, env: &dyn Environment, caller: &str, args: &ToolArgs) -> Result<Value, InternalFailure> {
        let ToolArgs::Remember(a) = args else {
            return Err(InternalFailure { code: GateCode::Unavailable, message: "not an internal tool".into() });
        };
        if caller != self.memory.owner() {
            let code = RememberCode::OtherUser;
            return Err(InternalFailure { code: code.into(), message: "not this user's memory".into() });
        }
        match self.memory.note_from(self.observations, &a.from_observation, Some(env)) {
            (RememberCode::Ok, note) => Ok(json!({"remembered": note.unwrap_or_default()})),
            (code, _) => Err(InternalFailure {
                code: code.into(),
                message: format!("nothing remembered from {}", a.from_observation),
            }),
        }
    }
}
