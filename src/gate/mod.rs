//! The gate: the only place a tool runs. [`ToolGate::run`] checks the allowlist again,
//! the arguments, the per-run call limit and the access; a granted write is parked as a
//! [`PendingAction`] (`pa-1`, `pa-2`, …) instead of running; every call leaves exactly one
//! [`AuditEvent`]. A parked action runs only with an [`ApprovalToken`], which only the
//! approval queue mints, and at most once: a retry replays the stored result.
//!
//! A tool that panics is caught (`tool_panicked`); a tool that does not answer is given up
//! after the gate's per-call timeout (`tool_timeout`); both name the tool and come back as
//! a failed call like any other. The built-in tools run in memory and answer at once; a
//! tool added to the gate ([`ToolGate::with_tool`]) answers with a future, which
//! [`ToolGate::run_async`] awaits for at most [`ToolGate::call_timeout`] (the loop uses it)
//! and [`ToolGate::run`] polls once (a caller that cannot wait gives it no time).

mod confirm;
mod counts;
mod ifc;
mod observation;
mod policy;

use crate::codes::codes;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::future::BoxFuture;
use crate::label::{IfcMode, Integrity, Label, Taint};
use crate::tools::mcp::{McpError, McpServer, McpServers};
use crate::tools::{
    AddToolError, ArgError, Started, Tool, ToolArgs, ToolCall, ToolData, ToolFailure, ToolFailureCode, ToolSet,
    ToolSpec, concat_compact, fingerprint_inline,
};
use crate::tools::{Environment, RecordFact};
use crate::unwind::CatchUnwind;
use crate::world::World;
use counts::RunCounts;
use tracing::Instrument;

pub use observation::Observation;
pub(crate) use policy::ApprovalMode;
pub use policy::{Access, Policy};

/// How long [`ToolGate::run_async`] waits for a tool that answers later, unless set
/// otherwise on the gate.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors of the gate module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The policy did not parse.
    #[error("policy: {0}")]
    BadPolicy(String),
    /// No pending action with that id.
    #[error("no pending action {0:?}")]
    UnknownPending(String),
    /// The pending action is not in a state that allows this.
    #[error("pending action {id:?} is {status:?}")]
    NotRunnable {
        /// The id.
        id: String,
        /// Its status.
        status: PendingStatus,
    },
    /// The approval was given for other arguments than the ones parked now.
    #[error("pending action {0:?} changed since it was approved")]
    ChangedSinceApproval(String),
}

codes! {
    /// Why the gate refused to run a call.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Refusal {
        /// Not in this task's allowlist, or no such tool (the two look the same).
        NotAllowed = "not_allowed",
        /// The arguments do not fit the schema.
        InvalidArguments = "invalid_arguments",
        /// The per-run limit for this tool is used up.
        CallLimit = "call_limit",
        /// A write tool that is not granted.
        NotGranted = "not_granted",
        /// Information flow: a control argument of a consequential call derives from an
        /// untrusted value (the trusted-action rule).
        UntrustedArgument = "untrusted_argument",
        /// Information flow: a consequential call would carry another user's data.
        OtherUsersData = "other_users_data",
    }
}

codes! {
    /// What the gate did with one call, as its audit event and the run's trace record it:
    /// `ok`, a refusal, a failure, a parking, or a person's decision on a parked action.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum GateCode {
        /// The tool ran and returned data.
        Ok = "ok",
        /// Refused: not in the task's allowlist, or no such tool.
        NotAllowed = "not_allowed",
        /// Refused: the arguments do not fit the schema.
        InvalidArguments = "invalid_arguments",
        /// Refused: the per-run limit for this tool is used up.
        CallLimit = "call_limit",
        /// Refused: a write tool that is not granted.
        NotGranted = "not_granted",
        /// Refused: a control argument derives from an untrusted value (information flow).
        UntrustedArgument = "untrusted_argument",
        /// Refused: the call would carry another user's data (information flow).
        OtherUsersData = "other_users_data",
        /// A granted write, parked for a person.
        NeedsApproval = "needs_approval",
        /// The tool ran: nothing with that id (or not yours).
        NotFound = "not_found",
        /// The tool ran: the input could not be processed.
        BadInput = "bad_input",
        /// The tool did not answer within the gate's per-call timeout.
        ToolTimeout = "tool_timeout",
        /// The tool panicked; the gate caught it.
        ToolPanicked = "tool_panicked",
        /// The caller stopped waiting for a tool that answers later.
        ToolAbandoned = "tool_abandoned",
        /// A tool server answered that the call failed.
        ToolError = "tool_error",
        /// A tool server could not be reached or did not answer as MCP says.
        ToolUnavailable = "tool_unavailable",
        /// A tool server changed a pinned tool mid-run; nothing was sent.
        ToolChanged = "tool_changed",
        /// A decided parked action could not run (denied, cancelled or unknown).
        NotRunnable = "not_runnable",
        /// A person confirmed a parked action (a PolicyPal card).
        Confirmed = "confirmed",
        /// A person withdrew a parked action.
        Cancelled = "cancelled",
        /// A retry of an action that already ran: its stored result, nothing ran.
        Replayed = "replayed",
        /// An internal tool this agent has no effects for.
        Unavailable = "unavailable",
        /// Memory: no observation with that id in this run.
        UnknownObservation = "unknown_observation",
        /// Memory: the observation is a failure.
        FailedObservation = "failed_observation",
        /// Memory: the observation holds no fact the application keeps.
        NoFact = "no_fact",
        /// Memory: this run has used its write budget.
        WriteBudget = "write_budget",
        /// Memory write rule: the key or source is malformed.
        BadKeyOrSource = "bad_key_or_source",
        /// Memory write rule: about another user.
        OtherUser = "other_user",
        /// Memory write rule: nothing to store.
        Empty = "empty",
        /// Memory write rule: longer than a note may be.
        TooLong = "too_long",
        /// Memory write rule: holds a secret.
        Secret = "secret",
        /// Memory write rule: holds personal data.
        PersonalData = "personal_data",
        /// Memory write rule: reads like an instruction.
        InstructionLike = "instruction_like",
        /// Memory write rule: holds characters that render as nothing.
        HiddenText = "hidden_text",
        /// Memory write rule: the memory is full.
        MemoryFull = "memory_full",
    }
}

impl From<Refusal> for GateCode {
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

impl From<ToolFailureCode> for GateCode {
    fn from(c: ToolFailureCode) -> Self {
        match c {
            ToolFailureCode::NotFound => Self::NotFound,
            ToolFailureCode::BadInput => Self::BadInput,
            ToolFailureCode::ToolTimeout => Self::ToolTimeout,
            ToolFailureCode::ToolPanicked => Self::ToolPanicked,
            ToolFailureCode::ToolError => Self::ToolError,
            ToolFailureCode::ToolUnavailable => Self::ToolUnavailable,
            ToolFailureCode::ToolChanged => Self::ToolChanged,
        }
    }
}

/// What the gate did with a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateOutcome {
    /// The tool ran and returned data (its JSON text, read as a [`Value`] on demand).
    Ok(ToolData),
    /// The gate refused; nothing ran.
    Refused {
        /// Why.
        code: Refusal,
        /// A short message for the observation.
        message: String,
    },
    /// The tool ran and failed.
    Failed {
        /// The failure, e.g. `not_found` or `tool_timeout`.
        code: GateCode,
        /// A short message.
        message: String,
    },
    /// A granted write, parked until a person decides; nothing ran.
    NeedsApproval {
        /// The pending action's id, `pa-N`.
        pending_id: String,
    },
}

impl GateOutcome {
    /// The outcome code: `ok`, a refusal, a failure code or `needs_approval`.
    pub fn code(&self) -> GateCode {
        match self {
            Self::Ok(_) => GateCode::Ok,
            Self::Refused { code, .. } => (*code).into(),
            Self::Failed { code, .. } => *code,
            Self::NeedsApproval { .. } => GateCode::NeedsApproval,
        }
    }

    /// The fact the whole result of `tool` states (before the observation's text is
    /// clipped): the one a help-desk record states with it, else the one `env` reads in its
    /// text; `None` for a refusal, a failure or a parked call.
    pub(crate) fn fact(&self, env: &dyn Environment, tool: &str) -> Option<RecordFact> {
        match self {
            // a record the help desk answered with states its fact (the same rule, read
            // from the record's members); any other result's is read in its text
            Self::Ok(data) => data.stated_fact().cloned().or_else(|| env.fact(tool, data.text())),
            _ => None,
        }
    }

    /// What a run observes of this outcome, the one wording every design uses: whether
    /// the call succeeded, and the text (the tool's data as compact JSON, or
    /// `error CODE: why`). Data's text is lent, not copied: every reader only reads it.
    ///
    /// The text holds no hidden character ([`crate::security::strip_hidden`]): the model
    /// reads what every check of an observation reads (claim support, labels, memory facts),
    /// never an instruction spelled in characters that render as nothing.
    pub fn observation(&self) -> (bool, Cow<'_, str>) {
        use crate::security::strip_hidden;
        let visible = |text: String| match strip_hidden(&text) {
            Cow::Borrowed(_) => Cow::Owned(text),
            Cow::Owned(stripped) => Cow::Owned(stripped),
        };
        match self {
            Self::Ok(data) => (true, strip_hidden(data.text())),
            Self::Refused { code, message } => (false, visible(format!("error {}: {message}", code.as_str()))),
            Self::Failed { code, message } => (false, visible(format!("error {code}: {message}"))),
            Self::NeedsApproval { pending_id } => {
                (false, visible(format!("error needs_approval: {pending_id} waits for a person; nothing ran")))
            }
        }
    }
}

/// One line of the gate's audit log: who asked, for what, and what happened. Never the
/// arguments, only their fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// The run (up to 24 bytes kept inline, as the caller and the tool: no allocation).
    pub(crate) run_id: CompactString,
    /// The user or role the call was made for.
    pub(crate) caller: CompactString,
    /// The tool as named in the call.
    pub(crate) tool: CompactString,
    /// The outcome code.
    pub outcome: GateCode,
    /// Fingerprint of tool and arguments (16 hex digits, held inline).
    pub(crate) fingerprint: CompactString,
}

impl AuditEvent {
    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The user or role the call was made for.
    pub fn caller(&self) -> &str {
        &self.caller
    }

    /// The tool as named in the call.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Fingerprint of tool and arguments (16 hex digits).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

codes! {
    /// Where a parked action stands.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum PendingStatus {
        /// Waiting for a person.
        Pending = "pending",
        /// Approved, not yet run.
        Approved = "approved",
        /// Refused by a person.
        Denied = "denied",
        /// Withdrawn.
        Cancelled = "cancelled",
        /// Approved and run; its result is stored.
        Executed = "executed",
    }
}

/// A granted write waiting for a human decision. Its call carries exactly the arguments
/// that will run, with the idempotency key replaced by one the application derives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingAction {
    /// `pa-N`.
    pub id: String,
    /// The run that asked.
    pub run_id: String,
    /// The user the run acts for.
    pub caller: String,
    /// The task.
    pub task: String,
    /// The call that will run.
    pub call: ToolCall,
    /// Status.
    pub status: PendingStatus,
    /// The stored result once executed (replayed on a retry).
    pub result: Option<Value>,
}

/// Proof that a person decided one parked action may run. Its constructors are
/// crate-private: the approval queue mints one after every decision rule passed, and a
/// PolicyPal card mints one when the run's own user confirms the card they were shown.
/// [`ToolGate::execute_approved`] is the only way a parked action runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalToken {
    run_id: String,
    pending_id: String,
    approver: String,
    fingerprint: String,
    /// Minted for a confirmed card (the action is still `pending` in the gate, and the
    /// confirmation is audited when it runs) rather than by the approval queue.
    card: bool,
}

impl ApprovalToken {
    /// Mints a token for a decision the approval queue has checked.
    pub(crate) fn mint(run_id: &str, pending_id: &str, approver: &str, fingerprint: &str) -> Self {
        Self {
            run_id: run_id.to_string(),
            pending_id: pending_id.to_string(),
            approver: approver.to_string(),
            fingerprint: fingerprint.to_string(),
            card: false,
        }
    }

    /// Mints a token for a card `by` confirmed: the card for parked action `pending_id` of
    /// `run_id` showed `shown` (tool and arguments); only that exact call may run.
    pub(crate) fn for_card(run_id: &str, pending_id: &str, shown: &ToolCall, by: &str) -> Self {
        Self {
            run_id: run_id.to_string(),
            pending_id: pending_id.to_string(),
            approver: by.to_string(),
            fingerprint: shown.fingerprint(),
            card: true,
        }
    }
    /// The run of the approved action.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
    /// The approved action, `pa-N`.
    pub fn pending_id(&self) -> &str {
        &self.pending_id
    }
    /// Who approved.
    pub fn approver(&self) -> &str {
        &self.approver
    }
    /// The fingerprint of the call the person saw.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// Why an internal effect did not happen: a named code and a short message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InternalFailure {
    /// Why, e.g. `instruction_like`.
    pub code: GateCode,
    /// A short message for the observation.
    pub message: String,
}

/// Applies tools whose policy access is `internal` (they change only the application's
/// own state, such as memory). The gate calls it after every check has passed.
pub(crate) trait InternalEffects {
    /// Applies a validated call for `caller`, in the gate's environment `env`.
    ///
    /// # Errors
    /// [`InternalFailure`] when the effect was refused or failed.
    fn apply(&mut self, env: &dyn Environment, caller: &str, args: &ToolArgs) -> Result<Value, InternalFailure>;
}

/// No internal effects: every internal tool fails as `unavailable`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NoInternalEffects;

impl InternalEffects for NoInternalEffects {
    fn apply(&mut self, _env: &dyn Environment, _caller: &str, _args: &ToolArgs) -> Result<Value, InternalFailure> {
        Err(InternalFailure { code: GateCode::Unavailable, message: "this agent has no internal effects".into() })
    }
}

/// The key the application uses for an effect of `pending_id` in `run_id`. A model
/// cannot choose it, so it cannot mint a fresh key to repeat an effect.
pub(crate) fn derived_idempotency_key(run_id: &str, pending_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(pending_id.as_bytes());
    format!("ak-{}", crate::tools::hex(&h.finalize()[..10]))
}

/// Who asks for a call, and where: the task whose allowlist applies, the run the call
/// counts against, and the user it acts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallContext<'a> {
    task: &'a str,
    run_id: &'a str,
    caller: &'a str,
}

impl<'a> CallContext<'a> {
    /// `caller` asks in `task` of run `run_id`.
    pub fn new(task: &'a str, run_id: &'a str, caller: &'a str) -> Self {
        Self { task, run_id, caller }
    }
}

/// The authority over tool execution for one agent (or one role). Its state is private:
/// calls go through [`ToolGate::run`]/[`ToolGate::run_async`], parked actions run only
/// through [`ToolGate::execute_approved`], and the audit and parked actions are read-only
/// from outside.
#[derive(Debug, Clone)]
pub struct ToolGate {
    /// Shared: gates of many runs may hold the same policy.
    policy: Arc<Policy>,
    /// The built-in registry and any tool added to this gate.
    registry: ToolSet,
    /// How long [`ToolGate::run_async`] waits for one call of a tool that answers later.
    call_timeout: Duration,
    /// One event per call, in order.
    audit: Vec<AuditEvent>,
    /// Parked actions by id.
    pending: BTreeMap<String, PendingAction>,
    /// Calls that passed the allowlist, per run and tool (a tool this gate knows is keyed
    /// by its `'static` name, not a copy of it).
    counts: BTreeMap<CompactString, RunCounts>,
    /// What the model behind this gate has seen: every result handed back, and whatever
    /// its application put in ([`ToolGate::absorb`]). Kept always; enforced with `ifc`.
    taint: Taint,
    /// Whether the information-flow rules are enforced ([`ifc`]).
    ifc: IfcMode,
}

impl ToolGate {
    /// A gate over the environment `env` (the help desk's [`World`], or any other)
    /// enforcing `policy`.
    pub fn new(policy: impl Into<Arc<Policy>>, env: impl Environment + 'static) -> Self {
        Self::over(policy, Arc::new(env))
    }

    /// A gate over a shared environment enforcing `policy`.
    pub fn over(policy: impl Into<Arc<Policy>>, env: Arc<dyn Environment>) -> Self {
        Self {
            policy: policy.into(),
            registry: ToolSet::new(env),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            audit: Vec::new(),
            pending: BTreeMap::new(),
            counts: BTreeMap::new(),
            taint: Taint::new(),
            ifc: IfcMode::Off,
        }
    }

    /// Turns the information-flow rules on or off for the calls to come (labels are kept
    /// either way): the trusted-action and confidentiality rules on consequential calls.
    pub fn set_ifc(&mut self, mode: IfcMode) {
        self.ifc = mode;
    }

    /// Whether the information-flow rules are enforced.
    pub fn ifc(&self) -> IfcMode {
        self.ifc
    }

    /// What the model behind this gate has seen, as a label and its first untrusted source.
    pub fn taint(&self) -> &Taint {
        &self.taint
    }

    /// Records that the application put a value labelled `label` from `source` into the
    /// context of the model behind this gate (a role's actor does it with the envelope it
    /// hands its model). A model cannot call it: it only ever writes text.
    pub fn absorb(&mut self, label: Label, source: &str) {
        self.taint.absorb(label, source);
    }

    /// This gate with `tool` added. It runs only where the policy lists it and gives it
    /// `read` access, with its declared string arguments, under [`ToolGate::call_timeout`].
    ///
    /// # Errors
    /// [`AddToolError`] for a name in use (built-in tools cannot be replaced) or a bad shape.
    pub fn with_tool(mut self, tool: Arc<dyn Tool>) -> Result<Self, AddToolError> {
        self.add_tool(tool)?;
        Ok(self)
    }

    /// Adds `tool` to this gate, as [`ToolGate::with_tool`] does.
    ///
    /// # Errors
    /// As [`ToolGate::with_tool`]; the gate is unchanged then.
    pub fn add_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), AddToolError> {
        self.registry.add(tool)
    }

    /// Adds the checked tools of a started MCP server (the ones the policy named and
    /// pinned). Each runs where the policy lists it, with the access the policy gives it:
    /// `read` at once, `write` parked for a person once granted; every result untrusted,
    /// as confidential as the policy says ([`Policy::confidentiality_of`]).
    ///
    /// # Errors
    /// [`AddToolError::Taken`] for a name in use; the gate is unchanged then.
    pub fn add_mcp(&mut self, server: &McpServer) -> Result<(), AddToolError> {
        self.registry.add_mcp(server)
    }

    /// Starts every server of `servers` whose tools this gate's policy names, holds each
    /// to the policy's pins ([`McpServer::connect`]) and adds its tools. The servers stop
    /// when the gate (and every clone of their tools) is dropped.
    ///
    /// # Errors
    /// The first [`McpError`]: a server the policy names that `servers` does not list
    /// ([`McpError::BadConfig`]), or a refusal of [`McpServer::connect`]. Tools of servers
    /// started before it stay added.
    pub async fn connect_mcp(&mut self, servers: &McpServers) -> Result<Vec<McpServer>, McpError> {
        let mut started = Vec::new();
        for name in self.policy.mcp_servers() {
            let server = self.policy.start_mcp_server(&name, servers).await?;
            self.add_mcp(&server).map_err(|e| McpError::Unusable { tool: name.clone(), message: e.to_string() })?;
            started.push(server);
        }
        Ok(started)
    }

    /// This gate waiting at most `limit` for one call of a tool that answers later.
    pub fn with_call_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit;
        self
    }

    /// Replaces the policy, for a run that has not started (a row's or a test's variant of
    /// the bundled policy).
    pub fn set_policy(&mut self, policy: impl Into<Arc<Policy>>) {
        self.policy = policy.into();
    }

    /// The policy this gate enforces.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The tools this gate knows: the built-in registry and the tools added to it.
    pub(crate) fn tools(&self) -> &ToolSet {
        &self.registry
    }

    /// `name` as this gate's own constant, when it serves that tool (its environment's or
    /// an added one): what a trace writes without searching it for secrets.
    pub fn tool_name(&self, name: &str) -> Option<&'static str> {
        self.registry.name_of(name)
    }

    /// True when `tool` is one this gate can run (built in or added), whatever the policy.
    pub fn knows(&self, tool: &str) -> bool {
        self.registry.has(tool)
    }

    /// The spec (name, description, argument schema) of `tool`, if this gate knows it.
    pub fn spec(&self, tool: &str) -> Option<ToolSpec> {
        self.registry.spec(tool)
    }

    /// How long one call of a tool that answers later may take.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// What the gate's own tools act on.
    pub fn environment(&self) -> &dyn Environment {
        self.registry.env()
    }

    /// The help desk the tools act on (its outbox shows what was sent), when the
    /// environment is the help desk.
    pub fn world(&self) -> Option<&World> {
        self.registry.env().as_world()
    }

    /// One event per call, in order.
    pub fn audit(&self) -> &[AuditEvent] {
        &self.audit
    }

    /// The audit so far, leaving this gate's empty (a role hands its events to its run).
    pub(crate) fn take_audit(&mut self) -> Vec<AuditEvent> {
        std::mem::take(&mut self.audit)
    }

    /// The parked actions, by id.
    pub fn pending(&self) -> &BTreeMap<String, PendingAction> {
        &self.pending
    }

    /// How many calls of `tool` `run_id` has made through this gate.
    pub fn count(&self, run_id: &str, tool: &str) -> u32 {
        self.counts.get(run_id).and_then(|c| c.get(self.registry.env().tool_names(), tool)).unwrap_or(0)
    }

    /// Sets the counters of `run_id` (used when a run resumes from a checkpoint).
    pub fn restore_counts(&mut self, run_id: &str, counts: &BTreeMap<String, u32>) {
        if counts.is_empty() {
            return;
        }
        let names = self.registry.env().tool_names();
        let of_run = self.counts.entry(run_id.into()).or_default();
        for (tool, n) in counts {
            let key = || self.registry.name_of(tool).map_or_else(|| Cow::Owned(tool.clone()), Cow::Borrowed);
            of_run.set(names, tool, *n, key);
        }
    }

    /// The counters of `run_id`, by tool.
    pub fn counts_of(&self, run_id: &str) -> BTreeMap<String, u32> {
        self.counts.get(run_id).map(|c| c.to_map(self.registry.env().tool_names())).unwrap_or_default()
    }

    fn record(&mut self, call: &ToolCall, run_id: &str, caller: &str, outcome: GateCode) {
        self.record_fingerprinted(call, fingerprint_inline(&call.name, &call.arguments), run_id, caller, outcome);
    }

    fn record_fingerprinted(
        &mut self,
        call: &ToolCall,
        fingerprint: CompactString,
        run_id: &str,
        caller: &str,
        outcome: GateCode,
    ) {
        tracing::debug!(target: "rolegate::gate", run = run_id, caller, tool = %call.name, outcome = outcome.as_str(), "gate");
        // a refusal or a hold is a guardrail's decision, under the call's `execute_tool` span
        let guardian = match outcome {
            GateCode::NotAllowed | GateCode::InvalidArguments | GateCode::CallLimit | GateCode::NotGranted => {
                Some("gate")
            }
            GateCode::NeedsApproval => Some("approval"),
            GateCode::UntrustedArgument | GateCode::OtherUsersData => Some("information_flow"),
            _ => None,
        };
        if let Some(guardian) = guardian {
            crate::spans::refused(guardian, crate::spans::Target::ToolCall, outcome.as_str(), &call.name);
        }
        self.audit.push(AuditEvent {
            run_id: run_id.into(),
            caller: caller.into(),
            tool: call.name.as_str().into(),
            outcome,
            fingerprint,
        });
    }

    /// Runs `call` in context `cx`, if the policy allows it. A tool that answers later is
    /// not waited for (`tool_timeout` at once); [`ToolGate::run_async`] waits.
    pub fn run(&mut self, call: &ToolCall, cx: CallContext<'_>) -> GateOutcome {
        let span = crate::spans::tool(&call.name, &call.id);
        let _in = span.enter();
        let outcome = match self.decide(call, cx, &mut NoInternalEffects) {
            Decided::Now(outcome) => outcome,
            Decided::Waiting(answer) => answer_at_once(&call.name, answer),
        };
        self.record(call, cx.run_id, cx.caller, outcome.code());
        tool_span_outcome(&span, &outcome);
        outcome
    }

    /// As [`ToolGate::run`], waiting up to [`ToolGate::call_timeout`] for a tool that
    /// answers later (`tool_timeout` after that; a panic is `tool_panicked`). Every check,
    /// count and audit event is the same; a built-in tool's call is decided before the
    /// returned future is first polled.
    pub fn run_async<'a>(&'a mut self, call: &ToolCall, cx: CallContext<'_>) -> GateCall<'a> {
        let fingerprint = fingerprint_inline(&call.name, &call.arguments);
        self.run_loop_async(call, &fingerprint, cx, &mut NoInternalEffects)
    }

    /// As [`ToolGate::run_async`], for the agent loop: a tool with `internal` access is
    /// applied by `internal` after the same checks (allowlist, arguments, call limit) and
    /// the same audit, and `fingerprint`, which the loop has just taken of this very call
    /// for its repeat check, is not taken again.
    pub(crate) fn run_loop_async<'a>(
        &'a mut self,
        call: &ToolCall,
        fingerprint: &str,
        cx: CallContext<'_>,
        internal: &mut dyn InternalEffects,
    ) -> GateCall<'a> {
        debug_assert_eq!(fingerprint, call.fingerprint());
        let (run_id, caller) = (cx.run_id, cx.caller);
        let span = crate::spans::tool(&call.name, &call.id);
        let entered = span.enter();
        match self.decide(call, cx, internal) {
            Decided::Now(outcome) => {
                self.record_fingerprinted(call, fingerprint.into(), run_id, caller, outcome.code());
                tool_span_outcome(&span, &outcome);
                GateCall::Now(Some(outcome))
            }
            Decided::Waiting(answer) => {
                let limit = self.call_timeout;
                let mut waiting = Waiting {
                    gate: self,
                    call: call.clone(),
                    fingerprint: fingerprint.into(),
                    run_id: run_id.to_string(),
                    caller: caller.to_string(),
                    recorded: false,
                };
                drop(entered);
                let waited = span.clone();
                GateCall::Waiting(Box::pin(
                    async move {
                        let outcome = wait_for(&waiting.call.name, limit, answer).await;
                        waiting.record(outcome.code());
                        tool_span_outcome(&waited, &outcome);
                        outcome
                    }
                    .instrument(span),
                ))
            }
        }
    }

    /// Puts back a parked action loaded from a durable store (a new process resuming a
    /// run). An action with the same id is replaced.
    pub fn restore_pending(&mut self, action: PendingAction) {
        self.pending.insert(action.id.clone(), action);
    }

    /// Sets the status of a parked action after a recorded decision (approved, denied,
    /// cancelled). Executed actions keep their status.
    pub(crate) fn mark(&mut self, pending_id: &str, status: PendingStatus) {
        if let Some(pa) = self.pending.get_mut(pending_id)
            && pa.status != PendingStatus::Executed
        {
            pa.status = status;
        }
    }

    /// Runs an approved action exactly once. A second call with the same token replays
    /// the stored result (`"replayed": true`) and runs nothing.
    ///
    /// # Errors
    /// [`GateError::UnknownPending`] for an action this gate does not hold (or of another
    /// run); [`GateError::NotRunnable`] when it was denied or cancelled;
    /// [`GateError::ChangedSinceApproval`] when its call is not the one approved.
    pub fn execute_approved(&mut self, token: &ApprovalToken) -> Result<GateOutcome, GateError> {
        let (id, may_run) = self.approved(token)?;
        self.run_parked_once(&id, may_run)
    }

    /// [`ToolGate::execute_approved`] for a tool that answers later (an MCP server's):
    /// the call is awaited under [`ToolGate::call_timeout`] instead of answering at once.
    ///
    /// # Errors
    /// As [`ToolGate::execute_approved`].
    pub async fn execute_approved_async(&mut self, token: &ApprovalToken) -> Result<GateOutcome, GateError> {
        let (id, may_run) = self.approved(token)?;
        let pa = match self.parked_to_run(&id, may_run)? {
            Ok(pa) => pa,
            Err(replayed) => return Ok(replayed),
        };
        let span = crate::spans::tool(&pa.call.name, &pa.call.id);
        let outcome = match self.start_parked(&pa) {
            Ok(outcome) => outcome,
            Err(answer) => wait_for(&pa.call.name, self.call_timeout, answer).instrument(span.clone()).await,
        };
        Ok(self.finish_parked(&pa, outcome, &span))
    }

    /// The parked action a token approves, and which statuses let it run; a confirmed
    /// card's confirmation is audited here, before the outcome.
    fn approved(&mut self, token: &ApprovalToken) -> Result<(String, MayRun), GateError> {
        let Some(pa) = self.pending.get(&token.pending_id).filter(|p| p.run_id == token.run_id).cloned() else {
            return Err(GateError::UnknownPending(token.pending_id.clone()));
        };
        if pa.call.fingerprint() != token.fingerprint {
            return Err(GateError::ChangedSinceApproval(pa.id));
        }
        if !token.card {
            return Ok((pa.id, |s| s == PendingStatus::Approved));
        }
        let runnable = |s| matches!(s, PendingStatus::Pending | PendingStatus::Approved);
        if runnable(pa.status) {
            self.record(&pa.call, &pa.run_id, &token.approver, GateCode::Confirmed);
        }
        Ok((pa.id, runnable))
    }

    /// Runs the call stored in parked action `id` exactly once, when its status passes
    /// `may_run`. An action that already ran replays its stored result (marked
    /// `"replayed": true`) and runs nothing; a failed run stays runnable.
    pub(crate) fn run_parked_once(&mut self, id: &str, may_run: MayRun) -> Result<GateOutcome, GateError> {
        let pa = match self.parked_to_run(id, may_run)? {
            Ok(pa) => pa,
            Err(replayed) => return Ok(replayed),
        };
        let span = crate::spans::tool(&pa.call.name, &pa.call.id);
        let outcome = {
            let _in = span.enter();
            match self.start_parked(&pa) {
                Ok(outcome) => outcome,
                Err(answer) => answer_at_once(&pa.call.name, answer),
            }
        };
        Ok(self.finish_parked(&pa, outcome, &span))
    }

    /// The parked action `id` when it may run now; its stored result (audited as
    /// `replayed`) when it ran already.
    fn parked_to_run(&mut self, id: &str, may_run: MayRun) -> Result<Result<PendingAction, GateOutcome>, GateError> {
        let pa = self.pending.get(id).cloned().ok_or_else(|| GateError::UnknownPending(id.into()))?;
        match (pa.status, &pa.result) {
            (PendingStatus::Executed, Some(stored)) => {
                let mut again = stored.clone();
                if let Some(obj) = again.as_object_mut() {
                    obj.insert("replayed".into(), Value::Bool(true));
                }
                self.record(&pa.call, &pa.run_id, &pa.caller, GateCode::Replayed);
                Ok(Err(GateOutcome::Ok(again.into())))
            }
            (status, _) if may_run(status) => Ok(Ok(pa)),
            (status, _) => Err(GateError::NotRunnable { id: pa.id, status }),
        }
    }

    /// Starts a parked call: its outcome now, or the answer to wait for.
    fn start_parked(&self, pa: &PendingAction) -> Result<GateOutcome, BoxFuture<'static, Result<Value, ToolFailure>>> {
        match self.registry.validate(&pa.call.name, &pa.call.arguments) {
            Ok(args) => match self.start(&pa.call.name, &pa.caller, &args) {
                Started::Done(result) => Ok(outcome_of(result.map(|o| o.into_data(&pa.call.name)))),
                Started::Waiting(answer) => Err(answer),
            },
            Err(e) => Ok(GateOutcome::Refused { code: Refusal::InvalidArguments, message: e.to_string() }),
        }
    }

    /// Stores a parked call's result (an action that ran never runs again) and audits it.
    fn finish_parked(&mut self, pa: &PendingAction, outcome: GateOutcome, span: &tracing::Span) -> GateOutcome {
        if let (GateOutcome::Ok(v), Some(stored)) = (&outcome, self.pending.get_mut(&pa.id)) {
            stored.status = PendingStatus::Executed;
            stored.result = Some(v.value().clone());
        }
        self.record(&pa.call, &pa.run_id, &pa.caller, outcome.code());
        tool_span_outcome(span, &outcome);
        outcome
    }

    /// Starts a validated call: the environment's tool runs now, an added or MCP tool's
    /// future is returned to be awaited; a panic while starting is `tool_panicked`.
    fn start(&self, tool: &str, caller: &str, args: &ToolArgs) -> Started<'_> {
        match catch_unwind(AssertUnwindSafe(|| self.registry.start(caller, args))) {
            Ok(started) => started,
            Err(_) => {
                Started::Done(Err(ToolFailure { code: ToolFailureCode::ToolPanicked, message: panic_message(tool) }))
            }
        }
    }

    fn decide(&mut self, call: &ToolCall, cx: CallContext<'_>, internal: &mut dyn InternalEffects) -> Decided {
        let CallContext { task, run_id, caller } = cx;
        let refuse = |code: Refusal, message: String| Decided::Now(GateOutcome::Refused { code, message });
        if !self.policy.allows(task, &call.name) || !self.registry.has(&call.name) {
            return refuse(Refusal::NotAllowed, format!("{} is not available in this task", call.name));
        }
        let args = match self.registry.validate(&call.name, &call.arguments) {
            Ok(a) => a,
            Err(ArgError::UnknownTool) => {
                return refuse(Refusal::NotAllowed, format!("{} is not available in this task", call.name));
            }
            Err(ArgError::Invalid(m)) => return refuse(Refusal::InvalidArguments, m),
        };
        let access = self.policy.access_of(&call.name);
        let mcp = self.registry.is_mcp(&call.name);
        if (self.registry.is_added(&call.name) && access != Access::Read) || (mcp && access == Access::Internal) {
            // an added tool only reads: it never parks, never needs a person, never sends;
            // an MCP tool reads or writes, and its writes park like any other
            return refuse(Refusal::NotAllowed, format!("{} is not available in this task", call.name));
        }
        // the information-flow rules, before the call counts (a refused call did nothing)
        if self.ifc == IfcMode::On
            && let Some(controls) = ifc::controls(&call.name, access, self.registry.env())
        {
            let env = self.registry.env();
            if let Err((code, message)) =
                ifc::check_call(&call.name, controls, &call.arguments, caller, env, &self.taint)
            {
                return refuse(code, message);
            }
        }
        let used = self.count(run_id, &call.name);
        if used >= self.policy.limit_of(&call.name) {
            return refuse(Refusal::CallLimit, format!("{} may run {} times per run", call.name, used));
        }
        let of_run = match self.counts.get_mut(run_id) {
            Some(c) => c,
            None => self.counts.entry(run_id.into()).or_default(),
        };
        let registry = &self.registry;
        of_run.set(registry.env().tool_names(), &call.name, used + 1, || {
            registry.name_of(&call.name).map_or_else(|| Cow::Owned(call.name.clone()), Cow::Borrowed)
        });
        if access == Access::Internal {
            return Decided::Now(
                match catch_unwind(AssertUnwindSafe(|| internal.apply(self.registry.env(), caller, &args))) {
                    Ok(Ok(v)) => GateOutcome::Ok(v.into()),
                    Ok(Err(f)) => GateOutcome::Failed { code: f.code, message: f.message },
                    Err(_) => panicked(&call.name),
                },
            );
        }
        if access == Access::Write {
            if !self.policy.grants.contains(&call.name) {
                return refuse(Refusal::NotGranted, format!("{} is not granted", call.name));
            }
            let id = format!("pa-{}", self.pending.len() + 1);
            let mut parked = call.clone();
            if let Some(obj) = parked.arguments.as_object_mut()
                && obj.contains_key("idempotency_key")
            {
                obj.insert("idempotency_key".into(), Value::String(derived_idempotency_key(run_id, &id)));
            }
            self.pending.insert(
                id.clone(),
                PendingAction {
                    id: id.clone(),
                    run_id: run_id.to_string(),
                    caller: caller.to_string(),
                    task: task.to_string(),
                    call: parked,
                    status: PendingStatus::Pending,
                    result: None,
                },
            );
            return Decided::Now(GateOutcome::NeedsApproval { pending_id: id });
        }
        // what the model will see of this call joins its context
        match self.start(&call.name, caller, &args) {
            Started::Done(Ok(output)) => {
                // the taint keeps the first untrusted source it absorbs (every result label is
                // untrusted): this result's source is written out only when it will be that one,
                // on the stack when it is short (a tool and a ticket id)
                let label = self.registry.env().result_label(&call.name, caller, &output).map(|(label, id)| {
                    (label, self.taint.source().is_none().then(|| concat_compact(&[call.name.as_str(), ":", id])))
                });
                let data = output.into_data(&call.name);
                if let Some((label, source)) = label {
                    self.taint.absorb(label, source.as_deref().unwrap_or(&call.name));
                }
                Decided::Now(GateOutcome::Ok(data))
            }
            Started::Done(Err(f)) => Decided::Now(GateOutcome::Failed { code: f.code.into(), message: f.message }),
            Started::Waiting(answer) => {
                let label = Label::new(Integrity::Untrusted, self.policy.confidentiality_of(&call.name));
                self.taint.absorb(label, &call.name);
                Decided::Waiting(answer)
            }
        }
    }
}

/// Which statuses of a parked action let it run.
type MayRun = fn(PendingStatus) -> bool;

/// A call through [`ToolGate::run_async`]: decided already (refused, parked, or a
/// built-in tool that answered at once: no allocation, and only the outcome is held while
/// it is awaited), or waiting for a tool that answers later (boxed, with the timeout).
#[must_use = "a gate call does nothing more until awaited; its audit event is written either way"]
pub enum GateCall<'a> {
    /// The outcome, until it is taken by the first poll.
    Now(Option<GateOutcome>),
    /// A started tool, its timeout and its audit event.
    Waiting(BoxFuture<'a, GateOutcome>),
}

impl std::fmt::Debug for GateCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Now(outcome) => f.debug_tuple("Now").field(outcome).finish(),
            Self::Waiting(_) => f.write_str("Waiting(..)"),
        }
    }
}

impl Future for GateCall<'_> {
    type Output = GateOutcome;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<GateOutcome> {
        match self.get_mut() {
            Self::Now(outcome) => match outcome.take() {
                Some(outcome) => Poll::Ready(outcome),
                None => Poll::Ready(GateOutcome::Failed {
                    code: GateCode::ToolAbandoned,
                    message: "this gate call was awaited already".to_string(),
                }),
            },
            Self::Waiting(waiting) => waiting.as_mut().poll(cx),
        }
    }
}

/// A call the gate is waiting for. It records the call's one audit event when the answer
/// comes, or `tool_abandoned` if whoever awaited it gave up first (the future was dropped:
/// the tool's own future is dropped with it).
struct Waiting<'a> {
    gate: &'a mut ToolGate,
    call: ToolCall,
    fingerprint: CompactString,
    run_id: String,
    caller: String,
    recorded: bool,
}

impl Waiting<'_> {
    fn record(&mut self, outcome: GateCode) {
        if !self.recorded {
            self.recorded = true;
            let fingerprint = std::mem::take(&mut self.fingerprint);
            self.gate.record_fingerprinted(&self.call, fingerprint, &self.run_id, &self.caller, outcome);
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.record(GateCode::ToolAbandoned);
    }
}

/// What the gate decided about a call: the outcome now, or a started tool to wait for.
enum Decided {
    /// Refused, parked, or run already.
    Now(GateOutcome),
    /// Every check passed and the tool started; its answer comes later.
    Waiting(BoxFuture<'static, Result<Value, ToolFailure>>),
}

fn outcome_of(result: Result<impl Into<ToolData>, ToolFailure>) -> GateOutcome {
    match result {
        Ok(v) => GateOutcome::Ok(v.into()),
        Err(f) => GateOutcome::Failed { code: f.code.into(), message: f.message },
    }
}

fn panic_message(tool: &str) -> String {
    format!("{tool} panicked; the gate stopped the call")
}

fn panicked(tool: &str) -> GateOutcome {
    GateOutcome::Failed { code: GateCode::ToolPanicked, message: panic_message(tool) }
}

/// A tool's answer when the caller cannot wait: polled once; not ready is a timeout.
fn answer_at_once(tool: &str, mut answer: BoxFuture<'static, Result<Value, ToolFailure>>) -> GateOutcome {
    let mut cx = Context::from_waker(Waker::noop());
    match catch_unwind(AssertUnwindSafe(|| answer.as_mut().poll(&mut cx))) {
        Ok(Poll::Ready(result)) => outcome_of(result),
        Ok(Poll::Pending) => GateOutcome::Failed {
            code: GateCode::ToolTimeout,
            message: format!("{tool} did not answer at once, and this caller cannot wait"),
        },
        Err(_) => panicked(tool),
    }
}

/// Waits for a tool's answer for at most `limit`, catching a panic while it is polled.
async fn wait_for(tool: &str, limit: Duration, answer: BoxFuture<'static, Result<Value, ToolFailure>>) -> GateOutcome {
    match tokio::time::timeout(limit, CatchUnwind(answer)).await {
        Ok(Ok(result)) => outcome_of(result),
        Ok(Err(_)) => panicked(tool),
        Err(_) => GateOutcome::Failed {
            code: GateCode::ToolTimeout,
            message: format!("{tool} did not answer within {limit:?}"),
        },
    }
}

/// Records a gate outcome on its `execute_tool` span (a refusal or a hold is not a
/// failure of the tool: its guardrail span says what happened).
fn tool_span_outcome(span: &tracing::Span, outcome: &GateOutcome) {
    let failed = matches!(outcome, GateOutcome::Failed { .. });
    crate::spans::tool_outcome(span, outcome.code().as_str(), !failed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::WorldData;
    use serde_json::json;
    use std::sync::Arc;

    fn gate(policy: Policy) -> ToolGate {
        ToolGate::new(policy, World::new(Arc::new(WorldData::bundled().unwrap())))
    }

    fn mail() -> ToolCall {
        ToolCall::new(
            "c1",
            "send_email_draft",
            json!({"to": "x@example.org", "subject": "s", "body": "b", "idempotency_key": "model-key"}),
        )
    }

    #[test]
    fn the_gate_refuses_outside_the_allowlist_and_audits_every_call() {
        let mut g = gate(Policy::bundled().unwrap());
        let read = ToolCall::new("c1", "get_ticket", json!({"ticket_id": "T-601"}));
        assert_eq!(g.run(&read, CallContext::new("triage", "r1", "kwame")).code(), "ok");
        assert_eq!(g.run(&mail(), CallContext::new("triage", "r1", "kwame")).code(), "not_allowed");
        assert_eq!(
            g.run(&ToolCall::new("c", "made_up", json!({})), CallContext::new("triage", "r1", "kwame")).code(),
            "not_allowed"
        );
        assert_eq!(g.run(&read, CallContext::new("no-such-task", "r1", "kwame")).code(), "not_allowed");
        let outcomes: Vec<_> = g.audit.iter().map(|e| (e.tool.as_str(), e.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [
                ("get_ticket", "ok"),
                ("send_email_draft", "not_allowed"),
                ("made_up", "not_allowed"),
                ("get_ticket", "not_allowed")
            ]
        );
        assert!(g.world().unwrap().outbox.is_empty());
    }

    #[test]
    fn a_write_needs_a_grant_and_then_parks_with_a_derived_key() {
        let mut g = gate(Policy::bundled().unwrap());
        assert_eq!(g.run(&mail(), CallContext::new("reply", "r1", "kwame")).code(), "not_granted");
        let mut g = gate(Policy::bundled().unwrap().with_grant("send_email_draft"));
        assert_eq!(
            g.run(&mail(), CallContext::new("reply", "r1", "kwame")),
            GateOutcome::NeedsApproval { pending_id: "pa-1".into() }
        );
        let pa = &g.pending["pa-1"];
        assert_eq!(pa.status, PendingStatus::Pending);
        assert_eq!(pa.call.arguments["idempotency_key"], json!(derived_idempotency_key("r1", "pa-1")));
        assert!(g.world().unwrap().outbox.is_empty(), "parking sends nothing");
    }

    #[test]
    fn a_tool_missing_from_the_access_table_counts_as_write() {
        let mut p = Policy::bundled().unwrap();
        p.access.remove("calculator");
        assert_eq!(p.access_of("calculator"), Access::Write);
        let mut g = gate(p);
        let calc = ToolCall::new("c", "calculator", json!({"expression": "1+1"}));
        assert_eq!(g.run(&calc, CallContext::new("triage", "r1", "kwame")).code(), "not_granted");
    }

    #[test]
    fn call_limits_are_per_run_and_per_tool() {
        let mut g = gate(Policy::bundled().unwrap().with_limit("lookup_document", 2));
        let doc = |d: &str| ToolCall::new("c", "lookup_document", json!({ "doc_id": d }));
        let codes: Vec<_> = ["kc-returns-v3", "kc-warranty-v2", "kc-battery-v1"]
            .iter()
            .map(|d| g.run(&doc(d), CallContext::new("triage", "r1", "kwame")).code())
            .collect();
        assert_eq!(codes, ["ok", "ok", "call_limit"]);
        assert_eq!(g.run(&doc("kc-returns-v3"), CallContext::new("triage", "r2", "kwame")).code(), "ok");
        assert_eq!(g.count("r1", "lookup_document"), 2);
    }

    #[test]
    fn a_gate_call_is_decided_before_it_is_polled_and_a_second_poll_is_a_named_failure() {
        let mut g = gate(Policy::bundled().unwrap());
        let read = ToolCall::new("c1", "get_ticket", json!({"ticket_id": "T-601"}));
        let mut call = g.run_async(&read, CallContext::new("triage", "r1", "kwame"));
        assert!(matches!(call, GateCall::Now(Some(GateOutcome::Ok(_)))), "{call:?}");
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(std::pin::Pin::new(&mut call).poll(&mut cx), Poll::Ready(GateOutcome::Ok(_))));
        match std::pin::Pin::new(&mut call).poll(&mut cx) {
            Poll::Ready(GateOutcome::Failed { code, .. }) => assert_eq!(code, GateCode::ToolAbandoned),
            other => panic!("{other:?}"),
        }
        drop(call);
        let outcomes: Vec<&str> = g.audit.iter().map(|e| e.outcome.as_str()).collect();
        assert_eq!(outcomes, ["ok"], "one audit event, written when the call was decided");
    }

    #[test]
    fn restored_counts_come_back_as_they_were_given_known_tool_or_not() {
        let mut g = gate(Policy::bundled().unwrap());
        let counts: BTreeMap<String, u32> =
            [("get_ticket".to_string(), 2), ("made_up".to_string(), 1)].into_iter().collect();
        g.restore_counts("r1", &counts);
        assert_eq!(g.counts_of("r1"), counts);
        assert_eq!((g.count("r1", "get_ticket"), g.count("r1", "made_up"), g.count("r2", "get_ticket")), (2, 1, 0));
        let read = ToolCall::new("c1", "get_ticket", json!({"ticket_id": "T-601"}));
        assert_eq!(g.run(&read, CallContext::new("triage", "r1", "kwame")).code(), "ok");
        assert_eq!(g.count("r1", "get_ticket"), 3);
        assert_eq!(g.counts_of("r1").get("made_up"), Some(&1));
    }

    /// The form of an audit event before its names became [`CompactString`]s.
    #[derive(Serialize)]
    struct StringEvent<'a> {
        run_id: &'a str,
        caller: &'a str,
        tool: &'a str,
        outcome: GateCode,
        fingerprint: &'a str,
    }

    #[test]
    fn audit_events_serialise_and_read_back_as_the_string_ones() {
        let names = [
            "",
            "r1",
            "bench-1999",
            "exactly twenty-four byte",
            "exactly twenty-five bytes",
            "é \"quoted\" \\ back\nslash \u{1F600}",
            "a run id of forty bytes, which is heap!!",
        ];
        for (i, name) in names.iter().enumerate() {
            let other = names[(i + 3) % names.len()];
            let e = AuditEvent {
                run_id: (*name).into(),
                caller: other.into(),
                tool: (*name).into(),
                outcome: GateCode::NeedsApproval,
                fingerprint: "ab".repeat(32).into(),
            };
            let old = StringEvent {
                run_id: name,
                caller: other,
                tool: name,
                outcome: GateCode::NeedsApproval,
                fingerprint: &e.fingerprint,
            };
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, serde_json::to_string(&old).unwrap(), "{name:?}");
            assert_eq!(serde_json::from_str::<AuditEvent>(&json).unwrap(), e);
        }
        let unknown = r#"{"run_id":"r","caller":"c","tool":"t","outcome":"ok","fingerprint":"f","x":1}"#;
        assert!(serde_json::from_str::<AuditEvent>(unknown).is_err(), "unknown fields are still rejected");
    }
}
