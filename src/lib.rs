//! rolegate: agents whose every safeguard is deterministic code outside the model.
//!
//! The model proposes, the code decides. Every model output — a proposed tool call, a
//! finish, a message to another role — is untrusted text that passes a check in code
//! before anything happens, and every run ends with a named reason.
//!
//! # Layout
//! - [`world`]: the synthetic environment (tickets, documents, users, outbox).
//! - [`tools`]: tool specs, typed arguments, the registry and execution.
//! - [`gate`]: the policy and [`gate::ToolGate`], the authority over tool execution.
//! - [`model`]: requests, responses, the `Decider`/`LlmClient` traits, fake models and the
//!   OpenAI-compatible HTTP client ([`model::http`], the only network I/O).
//! - [`agent`]: run state, proposal parsing, checks, budgets, the trace and the loop.
//! - [`memory`]: session memory and its write rules.
//! - [`human`]: risk classes, the approval queue, fatigue and batches, saga, signed
//!   checkpoints and resume.
//! - [`store`]: the durable store (embedded SQLite) and the cross-process approval desk.
//! - [`multi`]: planner, researcher and reviewer as actors, talking only through a
//!   coordinator that checks every message.
//! - [`security`]: instruction-like text, secrets, personal data, redaction.
//! - [`label`]: labels on values (integrity, confidentiality), their joins and the
//!   derivation rule the information-flow defense checks.
//! - [`cost`]: usage ledger, price table, token estimate, clocks.
//! - [`eval`]: the environment runs are built in, the scenario tables, the attack catalog,
//!   the defense matrix, the checkers and the report.
//! - [`design`]: designs side by side (fixed, plan, ReAct, PolicyPal) and their tables.
//! - [`spans`]: the `tracing` spans of a run, after the OpenTelemetry GenAI conventions.
//!
//! See `ARCHITECTURE.md` for the codemap and the invariants.

#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
mod codes;
pub mod cost;
pub mod design;
pub mod eval;
pub mod gate;
pub mod human;
pub mod lab;
pub mod label;
pub mod memory;
pub mod model;
pub mod multi;
pub mod report;
pub mod security;
pub mod spans;
pub mod store;
pub mod suite;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tools;
mod unwind;
pub mod world;

/// A boxed, sendable future: what the crate's async traits return (model clients,
/// deciders, tools that answer later).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

pub use agent::{Agent, AgentState, Run, StopReason};
pub use gate::{Policy, ToolGate};

/// Any error of the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From the agent loop.
    #[error(transparent)]
    Agent(#[from] agent::AgentError),
    /// From run state.
    #[error(transparent)]
    State(#[from] agent::StateError),
    /// From cost.
    #[error(transparent)]
    Cost(#[from] cost::CostError),
    /// From the gate.
    #[error(transparent)]
    Gate(#[from] gate::GateError),
    /// From the world.
    #[error(transparent)]
    World(#[from] world::WorldError),
    /// From memory.
    #[error(transparent)]
    Memory(#[from] memory::MemoryError),
    /// From building an environment.
    #[error(transparent)]
    Env(#[from] agent::EnvError),
    /// From the scenario tables.
    #[error(transparent)]
    Scenario(#[from] lab::ScenarioError),
    /// From the designs.
    #[error(transparent)]
    Design(#[from] design::DesignError),
    /// From a checkpoint or signing key.
    #[error(transparent)]
    Checkpoint(#[from] human::CheckpointError),
    /// From the approval queue.
    #[error(transparent)]
    Approval(#[from] human::ApprovalError),
    /// From resuming a run.
    #[error(transparent)]
    Resume(#[from] human::ResumeError),
    /// From the durable store.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// From the approval desk.
    #[error(transparent)]
    Desk(#[from] store::DeskError),
    /// From the structured trace export.
    #[error(transparent)]
    TraceExport(#[from] agent::TraceExportError),
    /// From a multi-agent run.
    #[error(transparent)]
    Multi(#[from] multi::MultiError),
}
