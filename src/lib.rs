//! rolegate: agents whose every safeguard is deterministic code outside the model.
//!
//! The model proposes, the code decides. Every model output — a proposed tool call, a
//! finish, a message to another role — is untrusted text that passes a check in code
//! before anything happens, and every run ends with a named reason.
//!
//! # Layout
//! Lowest layer first (a module imports only from layers below its own; see
//! `tests/architecture.rs`):
//! - [`security`]: instruction-like text, secrets, personal data, redaction; [`spans`]:
//!   the `tracing` spans of a run, after the OpenTelemetry GenAI conventions; `codes`
//!   (private): the `codes!` tables of named outcomes; `unwind` (private): panics turned
//!   into values; `future` (private): [`BoxFuture`].
//! - [`world`]: the synthetic environment (tickets, documents, users, outbox); [`cost`]:
//!   usage ledger, price table, token estimate, clocks; [`label`]: labels on values
//!   (integrity, confidentiality), their joins and the derivation rule the
//!   information-flow defense checks.
//! - [`tools`]: tool specs, typed arguments, the registry and execution.
//! - [`model`]: requests, responses, the `Decider`/`LlmClient` traits, fake models and the
//!   OpenAI-compatible HTTP client ([`model::http`], the only network I/O).
//! - [`gate`]: the policy and [`gate::ToolGate`], the authority over tool execution.
//! - [`memory`]: session memory and its write rules.
//! - [`agent`]: run state, proposal parsing, checks, budgets, the trace and the loop.
//! - [`human`]: risk classes, the approval queue, fatigue and batches, saga, signed
//!   checkpoints and resume; [`multi`]: planner, researcher and reviewer as actors,
//!   talking only through a coordinator that checks every message.
//! - [`lab`]: builds runs from data and flags, the attack catalog and the compromised
//!   fakes.
//! - [`design`]: designs side by side (fixed, plan, ReAct, PolicyPal) and their tables.
//! - [`eval`]: the scenario tables, trace grading, the go/no-go list, single versus multi
//!   and the benchmark.
//! - [`suite`]: the injection test suite, the defense matrix, experiments and their
//!   results files.
//! - [`report`]: JUnit XML and the self-contained HTML page with its sequence diagrams.
//! - [`store`]: the durable store (embedded SQLite) and the cross-process approval desk.
//! - `testkit` (feature `testkit`): invariants as functions, for the fuzz targets and the
//!   property tests.
//! - `error` (private): [`Error`], any error of the library.
//!
//! See `ARCHITECTURE.md` for the codemap and the invariants.

#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
mod codes;
pub mod cost;
pub mod design;
mod error;
pub mod eval;
mod future;
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

pub use agent::{Agent, AgentState, Run, StopReason};
pub use error::Error;
pub use future::BoxFuture;
pub use gate::{Policy, ToolGate};
