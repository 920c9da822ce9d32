//! The single-agent controlled loop: typed run state with legal transitions, strict
//! proposal parsing, checks in code, budgets checked before each spend, the trace and the
//! loop itself.

mod budget;
mod decider;
mod driver;
mod durable;
mod env;
mod export;
mod finish;
mod notes;
mod proposal;
mod state;
mod trace;

pub use budget::RunBudget;
pub use decider::{Decider, FixedPlan, ModelDecider};
pub use driver::{Agent, AgentConfig, Session};
pub use driver::{AgentError, CheckMode, Progress, Run};
pub(crate) use driver::{CheckCode, SharedSystem};
pub use durable::{Durable, StepSink};
pub use env::Env;
pub(crate) use env::EnvError;
pub(crate) use export::TraceExportError;
pub use export::{EXPORT_DETAIL_CHARS, EXPORT_FIELD_CHARS, TRACE_TARGET, TraceExport, TraceRecord};
pub(crate) use finish::answer_problem;
#[cfg(feature = "testkit")]
pub(crate) use proposal::MAX_PROPOSAL_BYTES;
pub(crate) use proposal::ProposalText;
pub use proposal::{Proposal, ProposalError, parse_proposal};
pub use state::{AgentState, MAX_ANSWER_CHARS, RawState, StateError, Status, StopReason};
pub(crate) use state::{MAX_GOAL_CHARS, MAX_OBSERVATION_CHARS};
pub use state::{MAX_GOAL_LIMIT, MAX_OBSERVATION_LIMIT};
pub use trace::TraceKind;
pub(crate) use trace::{Trace, TraceLine};
