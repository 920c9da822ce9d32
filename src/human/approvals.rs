//! The approval queue: a parked call becomes a request a person can read and decide.
//!
//! A request carries an id, the requester, an expiry, a preview of the exact arguments
//! that will run and their fingerprint. A decision passes fixed rules in order
//! (`unknown_request`, `not_pending`, `expired`, `bad_expiry`, `not_an_approver`, `self_approval`,
//! `changed_since_review`); the first that fails decides, and a refusal mints no token and
//! runs nothing. Expiry means no, judged by the approver's clock too: a request created in
//! the approver's future or open longer than [`MAX_LIFETIME`] is `bad_expiry`. Each
//! requester's open requests are capped (one requester cannot fill the queue for
//! everyone). Audit lines name who, what,
//! when, which tool and the arguments' fingerprint, never the arguments.
//!
//! [`fatigue`] measures a tired approver and [`make_batches`] groups requests so that a
//! person decides every irreversible one alone.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::risk::classify;
use crate::cost::SharedClock;
use crate::gate::{ApprovalToken, GateCode, GateOutcome, PendingAction, PendingStatus, ToolGate};
use crate::tools::ToolCall;
use crate::world::WorldData;

/// How long a request stays open unless configured otherwise: 15 minutes.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(900);
/// Most open requests of one requester unless configured otherwise.
pub(crate) const DEFAULT_MAX_OPEN: usize = 20;
/// The longest a request may stay open, whatever the requester's clock said: 24 hours.
pub const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How far ahead of the approver's clock a request's creation time may be: 5 minutes.
pub(crate) const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);
/// The role a user needs to decide requests.
pub(crate) const APPROVER_ROLE: &str = "approver";

/// Errors of the approval queue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The requester's open requests are at the cap; the request is refused rather than
    /// piled up.
    #[error("queue_full: {open} requests of this requester are open (the cap is {cap}); decide some first")]
    QueueFull {
        /// Open requests.
        open: usize,
        /// The cap.
        cap: usize,
    },
    /// The action is not waiting for a decision.
    #[error("pending action {0:?} is not waiting for a decision")]
    NotPending(String),
    /// A stored status name that is not known.
    #[error("unknown request status {0:?}")]
    UnknownStatus(String),
}

codes! {
    /// Where a request stands.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum RequestStatus {
        /// Waiting for a person.
        Pending = "pending",
        /// Approved (the action ran, or runs when the run resumes).
        Approved = "approved",
        /// Refused by a person.
        Denied = "denied",
        /// Withdrawn by the requester or an approver.
        Cancelled = "cancelled",
        /// Nobody decided in time: a no.
        Expired = "expired",
    }
}

impl FromStr for RequestStatus {
    type Err = ApprovalError;

    fn from_str(s: &str) -> Result<Self, ApprovalError> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Cancelled, Self::Expired]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| ApprovalError::UnknownStatus(s.to_string()))
    }
}

codes! {
    /// The answer to a decision.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[non_exhaustive]
    pub enum DecisionCode {
        /// The decision was recorded.
        Ok = "ok",
        /// No request with that id.
        UnknownRequest = "unknown_request",
        /// The request was already decided, withdrawn or expired.
        NotPending = "not_pending",
        /// The request expired before the decision: expiry means no.
        Expired = "expired",
        /// The person may not decide (not an approver; for a cancel, not the requester either).
        NotAnApprover = "not_an_approver",
        /// The requester may not approve their own request.
        SelfApproval = "self_approval",
        /// The parked arguments are not the ones the person reviewed.
        ChangedSinceReview = "changed_since_review",
        /// The request's time window is not believable on the approver's clock: created in
        /// the future (beyond [`MAX_CLOCK_SKEW`]) or open longer than [`MAX_LIFETIME`].
        BadExpiry = "bad_expiry",
    }
}

/// A request for a person's decision on one parked action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// `req-N`.
    pub id: String,
    /// The run that parked the action.
    pub run_id: String,
    /// The parked action, `pa-N` (unique within its run).
    pub pending_id: String,
    /// The tool that will run.
    pub tool: String,
    /// The tool and the exact arguments that will run, as the person reads them.
    pub preview: String,
    /// Fingerprint of the call the person reviews.
    pub fingerprint: String,
    /// The user the run acts for.
    pub requested_by: String,
    /// When it was made, in clock seconds.
    pub created_at: f64,
    /// When it turns into a no, in clock seconds.
    pub expires_at: f64,
    /// Where it stands.
    pub status: RequestStatus,
    /// Who decided (approved, denied or cancelled).
    #[serde(default)]
    pub decided_by: Option<String>,
    /// When, in clock seconds.
    #[serde(default)]
    pub decided_at: Option<f64>,
}

impl ApprovalRequest {
    /// True when the tool's effect cannot be taken back (such requests are never batched).
    pub fn irreversible(&self) -> bool {
        classify(&self.tool).irreversible
    }
}

/// One audit line: who did what, when, to which tool (by fingerprint), and the outcome.
/// The arguments are never in here: they may hold personal data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditLine {
    /// Clock seconds.
    pub ts: f64,
    /// The person (or `system` for an expiry sweep).
    pub actor: String,
    /// `submit`, `approve`, `deny`, `cancel` or `expire`.
    pub action: String,
    pub request_id: String,
    pub tool: String,
    /// Fingerprint of the call.
    pub fingerprint: String,
    /// The outcome: `pending` for a submit, else a decision code.
    pub outcome: String,
}

impl fmt::Display for AuditLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} {} {}", self.ts, self.actor, self.action, self.outcome)
    }
}

/// The three things a person can do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    Approve,
    Deny,
    Cancel,
}

impl Act {
    fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
            Self::Cancel => "cancel",
        }
    }
}

/// What a decision did.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The rule that decided (`ok` when recorded).
    pub code: DecisionCode,
    /// For an approval that was recorded: what the gate did with the action.
    pub outcome: Option<GateOutcome>,
}

impl Decision {
    fn refused(code: DecisionCode) -> Self {
        Self { code, outcome: None }
    }

    /// An approval whose action ran (or could not run, as a `not_runnable` failure).
    fn ran(outcome: Result<GateOutcome, crate::gate::GateError>) -> Self {
        let outcome =
            outcome.unwrap_or_else(|e| GateOutcome::Failed { code: GateCode::NotRunnable, message: e.to_string() });
        Self { code: DecisionCode::Ok, outcome: Some(outcome) }
    }
}

/// The preview of a call as a person reads it: the tool, then its arguments as sorted
/// JSON. The idempotency key is left out: the application sets it, not the model, and it
/// is covered by the fingerprint.
pub fn preview(call: &ToolCall) -> String {
    let args = match call.arguments.as_object() {
        Some(obj) => {
            let parts: Vec<String> = obj
                .iter()
                .filter(|(k, _)| k.as_str() != "idempotency_key")
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), v))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        None => call.arguments.to_string(),
    };
    format!("{} {args}", call.name)
}

/// The approval queue of one deployment (or one test).
#[derive(Clone, Debug)]
pub struct ApprovalQueue {
    /// Requests by id.
    pub requests: BTreeMap<String, ApprovalRequest>,
    /// Who may decide.
    pub approvers: BTreeSet<String>,
    /// How long a request stays open.
    pub ttl: Duration,
    /// Most open requests.
    pub max_open: usize,
    /// Every submit and decision, in order.
    pub audit: Vec<AuditLine>,
    /// Time for expiry and audit.
    clock: SharedClock,
}

impl ApprovalQueue {
    /// An empty queue with the default expiry and cap.
    pub fn new(approvers: impl IntoIterator<Item = impl Into<String>>, clock: SharedClock) -> Self {
        Self {
            requests: BTreeMap::new(),
            approvers: approvers.into_iter().map(Into::into).collect(),
            ttl: DEFAULT_TTL,
            max_open: DEFAULT_MAX_OPEN,
            audit: Vec::new(),
            clock,
        }
    }

    /// The users of `world` with the approver role.
    pub fn approvers_of(world: &WorldData) -> BTreeSet<String> {
        world.users().values().filter(|u| u.roles.iter().any(|r| r == APPROVER_ROLE)).map(|u| u.id.clone()).collect()
    }

    /// The clock's time in seconds.
    pub fn now(&self) -> f64 {
        self.clock.now().as_secs_f64()
    }

    /// Open (pending, unexpired) requests.
    pub fn open(&self) -> usize {
        let now = self.now();
        self.requests.values().filter(|r| r.status == RequestStatus::Pending && now < r.expires_at).count()
    }

    /// Open (pending, unexpired) requests of `requester`.
    pub fn open_by(&self, requester: &str) -> usize {
        let now = self.now();
        self.requests
            .values()
            .filter(|r| r.status == RequestStatus::Pending && now < r.expires_at && r.requested_by == requester)
            .count()
    }

    fn next_id(&self) -> String {
        let n = self.requests.keys().filter_map(|k| k.strip_prefix("req-")?.parse::<u64>().ok()).max().unwrap_or(0);
        format!("req-{}", n + 1)
    }

    fn log(&mut self, actor: &str, action: &str, req: &ApprovalRequest, outcome: &str) {
        let line = AuditLine {
            ts: self.now(),
            actor: actor.to_string(),
            action: action.to_string(),
            request_id: req.id.clone(),
            tool: req.tool.clone(),
            fingerprint: req.fingerprint.clone(),
            outcome: outcome.to_string(),
        };
        tracing::info!(target: "rolegate::approvals", actor, action, request = %req.id, tool = %req.tool, outcome, "approval");
        self.audit.push(line);
    }

    /// Turns a parked action into a request.
    ///
    /// # Errors
    /// [`ApprovalError::QueueFull`] when the requester's open requests are at the cap;
    /// [`ApprovalError::NotPending`] when the action is not waiting.
    pub fn submit(&mut self, action: &PendingAction) -> Result<ApprovalRequest, ApprovalError> {
        let id = self.next_id();
        self.submit_as(action, id)
    }

    /// As [`ApprovalQueue::submit`], with the request id given by the caller (a store
    /// hands out ids from its own sequence, so an id never comes round again).
    ///
    /// # Errors
    /// As [`ApprovalQueue::submit`].
    pub fn submit_as(&mut self, action: &PendingAction, id: String) -> Result<ApprovalRequest, ApprovalError> {
        if action.status != PendingStatus::Pending {
            return Err(ApprovalError::NotPending(action.id.clone()));
        }
        self.sweep();
        let open = self.open_by(&action.caller);
        if open >= self.max_open {
            return Err(ApprovalError::QueueFull { open, cap: self.max_open });
        }
        let now = self.now();
        let req = ApprovalRequest {
            id,
            run_id: action.run_id.clone(),
            pending_id: action.id.clone(),
            tool: action.call.name.clone(),
            preview: preview(&action.call),
            fingerprint: action.call.fingerprint(),
            requested_by: action.caller.clone(),
            created_at: now,
            expires_at: now + self.ttl.min(MAX_LIFETIME).as_secs_f64(),
            status: RequestStatus::Pending,
            decided_by: None,
            decided_at: None,
        };
        self.log(&req.requested_by, "submit", &req, "pending");
        self.requests.insert(req.id.clone(), req.clone());
        Ok(req)
    }

    /// Marks every pending request past its expiry as expired (audited as `system`).
    /// Returns the ids that expired now.
    pub fn sweep(&mut self) -> Vec<String> {
        let now = self.now();
        let due: Vec<String> = self
            .requests
            .values()
            .filter(|r| r.status == RequestStatus::Pending && now >= r.expires_at)
            .map(|r| r.id.clone())
            .collect();
        for id in &due {
            if let Some(r) = self.requests.get_mut(id) {
                r.status = RequestStatus::Expired;
            }
            if let Some(r) = self.requests.get(id).cloned() {
                self.log("system", "expire", &r, "expired");
            }
        }
        due
    }

    /// The rules in order; the first that fails decides.
    fn check(&mut self, id: &str, actor: &str, act: Act, gate: &ToolGate) -> DecisionCode {
        let Some(req) = self.requests.get(id).cloned() else {
            return DecisionCode::UnknownRequest;
        };
        let code = if req.status != RequestStatus::Pending {
            DecisionCode::NotPending
        } else if self.now() >= req.expires_at {
            self.sweep();
            DecisionCode::Expired
        } else if req.created_at > self.now() + MAX_CLOCK_SKEW.as_secs_f64()
            || req.expires_at - req.created_at > MAX_LIFETIME.as_secs_f64()
        {
            DecisionCode::BadExpiry
        } else if !(self.approvers.contains(actor) || act == Act::Cancel && actor == req.requested_by) {
            DecisionCode::NotAnApprover
        } else if act == Act::Approve && actor == req.requested_by {
            DecisionCode::SelfApproval
        } else if act == Act::Approve
            && gate
                .pending()
                .get(&req.pending_id)
                .filter(|p| p.run_id == req.run_id)
                .is_none_or(|p| p.call.fingerprint() != req.fingerprint)
        {
            DecisionCode::ChangedSinceReview
        } else {
            DecisionCode::Ok
        };
        self.log(actor, act.as_str(), &req, code.as_str());
        code
    }

    fn record(&mut self, id: &str, actor: &str, status: RequestStatus) -> Option<ApprovalRequest> {
        let now = self.now();
        let req = self.requests.get_mut(id)?;
        req.status = status;
        req.decided_by = Some(actor.to_string());
        req.decided_at = Some(now);
        Some(req.clone())
    }

    /// Approves request `id` as `actor` and, when every rule passes, runs the action once
    /// through `gate` (which stores its result for replay).
    pub fn approve(&mut self, id: &str, actor: &str, gate: &mut ToolGate) -> Decision {
        match self.approval(id, actor, gate) {
            Ok(token) => Decision::ran(gate.execute_approved(&token)),
            Err(refused) => refused,
        }
    }

    /// [`ApprovalQueue::approve`] for an action whose tool answers later (an MCP server's
    /// write): the call is awaited under the gate's per-call timeout.
    pub async fn approve_async(&mut self, id: &str, actor: &str, gate: &mut ToolGate) -> Decision {
        match self.approval(id, actor, gate) {
            Ok(token) => Decision::ran(gate.execute_approved_async(&token).await),
            Err(refused) => refused,
        }
    }

    /// Checks and records an approval; the token that lets the action run.
    fn approval(&mut self, id: &str, actor: &str, gate: &mut ToolGate) -> Result<ApprovalToken, Decision> {
        let code = self.check(id, actor, Act::Approve, gate);
        if code != DecisionCode::Ok {
            return Err(Decision::refused(code));
        }
        let Some(req) = self.record(id, actor, RequestStatus::Approved) else {
            return Err(Decision::refused(DecisionCode::UnknownRequest));
        };
        gate.mark(&req.pending_id, PendingStatus::Approved);
        Ok(ApprovalToken::mint(&req.run_id, &req.pending_id, actor, &req.fingerprint))
    }

    /// Denies request `id` as `actor`; nothing runs.
    pub fn deny(&mut self, id: &str, actor: &str, gate: &mut ToolGate) -> DecisionCode {
        self.close(id, actor, Act::Deny, RequestStatus::Denied, PendingStatus::Denied, gate)
    }

    /// Withdraws request `id`; the requester or an approver may. Nothing runs.
    pub fn cancel(&mut self, id: &str, actor: &str, gate: &mut ToolGate) -> DecisionCode {
        self.close(id, actor, Act::Cancel, RequestStatus::Cancelled, PendingStatus::Cancelled, gate)
    }

    fn close(
        &mut self,
        id: &str,
        actor: &str,
        act: Act,
        status: RequestStatus,
        pending: PendingStatus,
        gate: &mut ToolGate,
    ) -> DecisionCode {
        let code = self.check(id, actor, act, gate);
        if code == DecisionCode::Ok
            && let Some(req) = self.record(id, actor, status)
        {
            gate.mark(&req.pending_id, pending);
        }
        code
    }

    /// The token of a request that was approved earlier (to finish or replay its action
    /// after a restart); `None` for any other status.
    pub fn token_for(&self, id: &str) -> Option<ApprovalToken> {
        let req = self.requests.get(id).filter(|r| r.status == RequestStatus::Approved)?;
        let by = req.decided_by.as_deref()?;
        Some(ApprovalToken::mint(&req.run_id, &req.pending_id, by, &req.fingerprint))
    }
}

/// Thresholds for [`fatigue`]. Examples only: set yours from your own data, and treat a
/// flag as a question, not a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FatigueRule {
    /// Fewer decisions than this are never flagged.
    pub min_decisions: usize,
    /// Flag when the approve rate is at least this…
    pub approve_rate_at_least: f64,
    /// …and the median decision took less than this many seconds.
    pub median_seconds_below: f64,
}

impl Default for FatigueRule {
    fn default() -> Self {
        Self { min_decisions: 5, approve_rate_at_least: 0.95, median_seconds_below: 5.0 }
    }
}

/// How one person has been deciding.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fatigue {
    /// Approvals and denials made.
    pub decisions: usize,
    /// Approvals / decisions (0 without decisions).
    pub approve_rate: f64,
    /// Median seconds from request to decision.
    pub median_seconds: f64,
    /// True when the pattern looks like stamping.
    pub flagged: bool,
}

impl fmt::Display for Fatigue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Fatigue(decisions={}, approve_rate={:.2}, median_seconds={:.1}, flagged={})",
            self.decisions, self.approve_rate, self.median_seconds, self.flagged
        )
    }
}

/// How `person` has decided the requests of `queue`, with the default rule.
pub fn fatigue(queue: &ApprovalQueue, person: &str) -> Fatigue {
    fatigue_with(queue.requests.values(), person, FatigueRule::default())
}

/// How `person` decided `requests` (approvals and denials), judged by `rule`.
pub(crate) fn fatigue_with<'a>(
    requests: impl IntoIterator<Item = &'a ApprovalRequest>,
    person: &str,
    rule: FatigueRule,
) -> Fatigue {
    let mut approved = 0usize;
    let mut took: Vec<f64> = Vec::new();
    for r in requests {
        if r.decided_by.as_deref() != Some(person)
            || !matches!(r.status, RequestStatus::Approved | RequestStatus::Denied)
        {
            continue;
        }
        if r.status == RequestStatus::Approved {
            approved += 1;
        }
        took.push(r.decided_at.map_or(0.0, |t| (t - r.created_at).max(0.0)));
    }
    let decisions = took.len();
    took.sort_by(f64::total_cmp);
    let median_seconds = match decisions {
        0 => 0.0,
        n if n % 2 == 1 => took[n / 2],
        n => (took[n / 2 - 1] + took[n / 2]) / 2.0,
    };
    #[allow(clippy::cast_precision_loss)] // counts of decisions are small
    let approve_rate = if decisions == 0 { 0.0 } else { approved as f64 / decisions as f64 };
    let flagged = decisions >= rule.min_decisions
        && approve_rate >= rule.approve_rate_at_least
        && median_seconds < rule.median_seconds_below;
    Fatigue { decisions, approve_rate, median_seconds, flagged }
}

/// Groups requests for review: requests of the same reversible tool share a batch of at
/// most `max_size` (in the order given); every irreversible request is a batch of its own.
/// Returns the ids, batch by batch, in the order each batch was started.
pub fn make_batches(requests: &[ApprovalRequest], max_size: usize) -> Vec<Vec<String>> {
    let max_size = max_size.max(1);
    let mut batches: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for r in requests {
        if r.irreversible() {
            batches.push((None, vec![r.id.clone()]));
            continue;
        }
        let open = batches.iter_mut().find(|(tool, ids)| tool.as_deref() == Some(&r.tool) && ids.len() < max_size);
        match open {
            Some((_, ids)) => ids.push(r.id.clone()),
            None => batches.push((Some(r.tool.clone()), vec![r.id.clone()])),
        }
    }
    batches.into_iter().map(|(_, ids)| ids).collect()
}
