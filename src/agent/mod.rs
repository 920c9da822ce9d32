//! The single-agent controlled loop: typed run state with legal transitions, strict
//! proposal parsing, checks in code, budgets checked before each spend, the trace and the
//! loop itself.

mod budget;
mod driver;
mod export;
mod finish;
mod proposal;
mod state;
mod trace;

pub use budget::RunBudget;
pub use driver::{Agent, AgentError, CheckCode, CheckMode, Progress, Run, SINGLE_PROMPT, Session, StepHook};
pub use export::{EXPORT_FIELD_CHARS, JsonTraceLayer, TRACE_TARGET, TraceExport, TraceExportError, TraceRecord};
pub use finish::{AnswerProblem, answer_problem};
pub use proposal::{MAX_PROPOSAL_BYTES, Proposal, ProposalError, parse_proposal};
pub use state::{
    AgentState, MAX_ANSWER_CHARS, MAX_GOAL_CHARS, MAX_OBSERVATION_CHARS, Observation, RawState, StateError, Status,
    StopReason,
};
pub use trace::{DETAIL_CHARS, Trace, TraceKind, TraceLine};
