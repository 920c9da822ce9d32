//! Three roles on tokio actors, talking only through a coordinator.
//!
//! A planner writes a brief, a researcher (the single-agent loop with its own gate) reads
//! and writes a finding, a reviewer checks it with its own tool and gives a verdict. Each
//! role is an actor with its own model and its own scoped [`ToolGate`](crate::gate::ToolGate);
//! none holds another's handle or a send tool. Their output is raw text that the
//! coordinator — plain code, one actor per run — parses strictly, routes, filters and
//! checks against what the researcher really read before it becomes an [`Envelope`].
//!
//! # Layout
//! - [`envelope`]: roles, kinds, the strict bodies, [`Envelope`], [`RejectCode`] and the
//!   parser.
//! - [`routes`]: the route table and the role scopes.
//! - [`graph`]: the declared call graph ([`CallGraph`]) and its per-edge rules.
//! - [`budget`]: [`MultiBudget`], checked before every hand-off.
//! - [`support`]: sources and claims rebuilt from the researcher's observations.
//! - [`roles`]: the role actors (handle pattern) and what each does with its assignment.
//! - [`coordinator`]: the coordinator actor, [`start`] and [`run`].
//! - [`behaviours`]: the fake role models that express every scenario row.
//! - [`models`]: [`RoleSetup`], a fake behaviour or a real model (HTTP) per role.
//! - [`labels`]: the label the coordinator stamps on an envelope, the endorsement of a
//!   strict claim and the confidentiality rule at the routes.
//! - `short_text`: short labels and trace details built on the stack.

pub(crate) mod behaviours;
pub(crate) mod budget;
pub(crate) mod coordinator;
pub(crate) mod envelope;
pub(crate) mod graph;
pub(crate) mod labels;
pub(crate) mod models;
pub(crate) mod roles;
pub(crate) mod routes;
mod short_text;
pub(crate) mod support;

use crate::codes::codes;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

use crate::agent::Trace;
use crate::gate::{AuditEvent, GateCode, Refusal};

pub use behaviours::{Behaviours, PlannerKind, ResearcherKind, ReviewerKind};
pub use behaviours::{FAKE_PLANNER, FAKE_RESEARCHER, FAKE_REVIEWER, FakePlanner, FakeResearcher, FakeReviewer};
pub use budget::MultiBudget;
#[cfg(feature = "testkit")]
pub(crate) use coordinator::check_message;
pub use coordinator::{
    Intake, MultiConfig, MultiEnv, MultiHandle, OnReject, RoleModels, RolePrompts, RoleTools, run, start, start_with,
};
pub(crate) use coordinator::{IntakeRules, check_envelope};
#[cfg(feature = "testkit")]
pub(crate) use envelope::Body;
pub use envelope::MAX_MESSAGE_BYTES;
pub(crate) use envelope::{Envelope, InstructionFilter};
pub use envelope::{Kind, RejectCode, Role, parse_message};
pub use graph::{
    CallGraph, CallGraphError, EdgeSpec, EdgeTable, Field, LabelRule, MAX_CALL_GRAPH_BYTES, install_call_graph,
    installed_call_graph,
};
pub use models::RoleSetup;
pub use routes::ROUTES;
pub use routes::Scopes;
pub use routes::next_hop;
pub use support::ClaimMode;
pub(crate) use support::Evidence;

/// Errors that keep a multi-agent run from being carried out at all. Every other ending
/// is a [`MultiRun`] with a [`MultiReason`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MultiError {
    /// The policy has no task for a role's scope.
    #[error("the policy has no task {0} (each role's scope is the task named after it)")]
    NoScope(Role),
    /// A role's scope holds a tool that is not read-only.
    #[error("the {role} scope holds {tool:?}, which is not a read tool: no role may hold a write tool")]
    WriteInScope {
        /// The role.
        role: Role,
        /// The tool.
        tool: String,
    },
    /// The goal is empty or too long.
    #[error("the goal must be 1 to 300 characters, or to the run's own goal limit")]
    BadGoal,
    /// The run id is not 1 to 40 of `a-z`, `0-9` and `-`.
    #[error("the run id must be 1 to 40 of a-z, 0-9 and -")]
    BadRunId,
    /// The bundled call graph does not load (a test guards it).
    #[error("call graph: {0}")]
    CallGraph(#[from] CallGraphError),
    /// A role model has no price.
    #[error(transparent)]
    Cost(#[from] crate::cost::CostError),
    /// Tools given to a role's gate clash with each other.
    #[error("role tools: {0}")]
    Tools(#[from] crate::tools::AddToolError),
    /// The coordinator itself failed (a bug: roles failing end their run with a reason).
    #[error("the coordinator of run {run_id} failed: {detail}")]
    CoordinatorFailed {
        /// The run.
        run_id: String,
        /// What happened.
        detail: String,
    },
}

codes! {
    /// Why a multi-agent run ended. A closed set.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum MultiReason {
        /// The reviewer approved a finding: the run has an answer.
        Done = "done",
        /// The coordinator refused a message (and the run stops on a rejection).
        RejectedMessage = "rejected_message",
        /// No round left for another attempt.
        RoundLimit = "round_limit",
        /// No room for another message (rejected ones count).
        MessageLimit = "message_limit",
        /// No model call left for the next role.
        CallLimit = "call_limit",
        /// The run's wall time is used up.
        TimeBudget = "time_budget",
        /// The run's credits are used up (or the next call could cross them).
        CostBudget = "cost_budget",
        /// Cancelled from outside.
        Cancelled = "cancelled",
        /// A role actor panicked or dropped its channel; only this run ends.
        RoleFailed = "role_failed",
        /// A role's own loop ended without a message for a reason of its own (stuck, a
        /// repeated call, a model error); its trace names it.
        RoleStopped = "role_stopped",
    }
}

/// A message the coordinator refused: who sent it (from the channel) and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The role whose channel the text came on.
    pub sender: Role,
    /// The code.
    pub code: RejectCode,
    /// The refused text, redacted and clipped to [`REJECTED_TEXT_CHARS`] (what a report
    /// shows; the text is agent output, shown as data).
    pub text: String,
}

/// Most characters of a refused message's text kept in a [`Rejection`].
pub const REJECTED_TEXT_CHARS: usize = 600;

/// A tool call a role proposed and its gate (or its loop's check) refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The role.
    pub role: Role,
    /// The tool as proposed.
    pub tool: String,
    /// Why it was refused.
    pub code: DenialCode,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.role, self.tool, self.code.as_str())
    }
}

impl Serialize for Denial {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A role whose own loop ended the run (`role_stopped`), and why: its loop's reason and,
/// for a failed model call, the call's code and message (redacted), which the coordinator's
/// trace line leaves out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoleStopped {
    /// The role.
    pub role: Role,
    /// Its loop's reason (`model_error`, `stuck`, …).
    pub reason: crate::agent::StopReason,
    /// `code: message` of the failed model call behind a `model_error`
    /// (`truncated: the server stopped the reply at max_tokens …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

impl fmt::Display for RoleStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role, self.reason.as_str())?;
        match &self.cause {
            Some(cause) => write!(f, " ({cause})"),
            None => Ok(()),
        }
    }
}

/// A role that failed, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoleFailure {
    /// The role.
    pub role: Role,
    /// What its task did (`panicked: …` or `dropped its reply`).
    pub detail: String,
}

codes! {
    /// Why a role's tool call was refused: by the role's own check before the gate
    /// (`not_allowed`, `invalid_arguments`, `repeated_call`) or by the gate.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum DenialCode {
        /// Not in the role's scope, or no such tool.
        NotAllowed = "not_allowed",
        /// The arguments do not fit the schema.
        InvalidArguments = "invalid_arguments",
        /// The per-run limit for this tool is used up.
        CallLimit = "call_limit",
        /// A write tool that is not granted.
        NotGranted = "not_granted",
        /// A call the role's loop already made.
        RepeatedCall = "repeated_call",
        /// Information flow: a control argument derives from an untrusted value.
        UntrustedArgument = "untrusted_argument",
        /// Information flow: the call would carry another user's data.
        OtherUsersData = "other_users_data",
    }
}

impl DenialCode {
    /// The denial a gate outcome is, if it is a refusal.
    pub(crate) fn of_gate(code: GateCode) -> Option<Self> {
        match code {
            GateCode::NotAllowed => Some(Self::NotAllowed),
            GateCode::InvalidArguments => Some(Self::InvalidArguments),
            GateCode::CallLimit => Some(Self::CallLimit),
            GateCode::NotGranted => Some(Self::NotGranted),
            GateCode::UntrustedArgument => Some(Self::UntrustedArgument),
            GateCode::OtherUsersData => Some(Self::OtherUsersData),
            _ => None,
        }
    }
}

impl From<Refusal> for DenialCode {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotAllowed => Self::NotAllowed,
            Refusal::InvalidArguments => Self::InvalidArguments,
            Refusal::CallLimit => Self::CallLimit,
            Refusal::NotGranted => Self::NotGranted,
            Refusal::UntrustedArgument => Self::UntrustedArgument,
            Refusal::OtherUsersData => Self::OtherUsersData,
        }
    }
}

/// The result of a multi-agent run. The same inputs give the same value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MultiRun {
    /// The run id.
    pub run_id: String,
    /// Why it ended.
    pub reason: MultiReason,
    /// Accepted messages, in order (`m1`, `m2`, …).
    pub messages: Vec<Envelope>,
    /// Refused messages, in order.
    pub rejected: Vec<Rejection>,
    /// Refused tool calls, in order.
    pub denied: Vec<Denial>,
    /// Model calls over all roles.
    pub role_calls: u32,
    /// Rounds started.
    pub rounds: u32,
    /// Tool names each role sent to its gate, in order (every role is listed).
    pub tools: BTreeMap<Role, Vec<String>>,
    /// Credits spent over all roles.
    pub cost: Decimal,
    /// Per role: paid model calls, input and output tokens (as the model's server reported
    /// them, estimated when it did not) and credits. Every role is listed.
    pub usage: BTreeMap<Role, crate::cost::Summary>,
    /// The approved claim, when done.
    pub answer: Option<String>,
    /// The role that failed, for `role_failed`.
    pub failed: Option<RoleFailure>,
    /// The role whose own loop stopped the run, for `role_stopped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<RoleStopped>,
    /// E-mails that left the outbox during the run.
    pub emails: usize,
    /// The coordinator's trace, then each role's (planner, researcher, reviewer).
    pub traces: Vec<Trace>,
    /// Each role's gate audit, in order per role.
    pub audit: Vec<(Role, AuditEvent)>,
}

impl MultiRun {
    /// The rejection codes, in order.
    pub fn rejected_codes(&self) -> Vec<RejectCode> {
        self.rejected.iter().map(|r| r.code).collect()
    }

    /// The denied calls as `role:tool:code`, in order.
    pub fn denied_lines(&self) -> Vec<String> {
        self.denied.iter().map(ToString::to_string).collect()
    }
}
