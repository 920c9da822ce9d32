//! The approval rules for any sequence of parks, decisions, waits, edits and retries:
//! the queue ([`ApprovalQueue`]) over one gate whose write tool is granted, so every
//! `send_email_draft` parks and runs only through [`ToolGate::execute_approved`].
//!
//! What must hold after every operation:
//! - an irreversible call never runs without an approved, unexpired, non-self decision:
//!   each e-mail sent belongs to a request approved by an approver who is not its
//!   requester, before its expiry, for exactly the arguments the person reviewed;
//! - a decision applies at most once: a request that left `pending` never changes again,
//!   and nothing decided earlier sends anything again (a retry replays the stored result);
//! - a refused decision changes nothing but the audit (and an expiry it noticed);
//! - the outbox holds one e-mail per executed action, and every executed action has one.

use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

use super::{Broken, Fixture, ensure};
use crate::cost::ManualClock;
use crate::gate::CallContext;
use crate::gate::{GateOutcome, PendingStatus, ToolGate};
use crate::human::{ApprovalQueue, DecisionCode, RequestStatus};
use crate::tools::ToolCall;
use crate::world::World;

/// The runs parks happen in, and the user each acts for.
pub const APPROVAL_RUNS: [(&str, &str); 4] =
    [("run-1", "kwame"), ("run-2", "lena"), ("run-3", "mallory"), ("run-4", "lena")];
/// Who decides: two approvers (kwame, lena), a customer who is not one, and nobody.
pub const ACTORS: [&str; 4] = ["kwame", "lena", "mallory", ""];
/// How long a request stays open in these checks.
pub const APPROVAL_TTL: Duration = Duration::from_secs(60);
/// The open-request cap of one requester in these checks (small, so a full queue happens).
pub const APPROVAL_MAX_OPEN: usize = 2;

/// One operation on the queue. Request and actor numbers pick from what exists (modulo).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalOp {
    /// A run's model asks to send mail: the gate parks it and the queue files a request.
    Park {
        /// Index into [`APPROVAL_RUNS`].
        run: u8,
    },
    /// An actor approves a request.
    Approve {
        /// Which request.
        request: u8,
        /// Index into [`ACTORS`].
        actor: u8,
    },
    /// An actor denies a request.
    Deny {
        /// Which request.
        request: u8,
        /// Index into [`ACTORS`].
        actor: u8,
    },
    /// An actor withdraws a request.
    Cancel {
        /// Which request.
        request: u8,
        /// Index into [`ACTORS`].
        actor: u8,
    },
    /// The clock moves.
    Wait {
        /// Seconds.
        secs: u16,
    },
    /// The parked arguments of a request change after it was filed (a tampered store).
    Edit {
        /// Which request.
        request: u8,
    },
    /// A retry after a crash: the token of an approved request is used again.
    Replay {
        /// Which request.
        request: u8,
    },
}

/// What the operations came to: the decision codes given, in order, and e-mails sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalVerdict {
    /// `approve:ok`, `deny:self_approval`, `park:queue_full`, `replay:replayed`, …
    pub codes: Vec<String>,
    /// E-mails sent in the end.
    pub emails: usize,
}

fn pick<T: Copy>(items: &[T], i: u8) -> Option<T> {
    items.get(usize::from(i).checked_rem(items.len())?).copied()
}

/// The state a decision is judged against: statuses and the outbox before it.
fn statuses(queue: &ApprovalQueue) -> BTreeMap<String, RequestStatus> {
    queue.requests.iter().map(|(id, r)| (id.clone(), r.status)).collect()
}

/// Runs `ops` against a fresh queue and gate and checks every rule after each.
///
/// # Errors
/// [`Broken`] when any rule of the module documentation fails.
pub fn check_approval_ops(fx: &Fixture, ops: &[ApprovalOp]) -> Result<ApprovalVerdict, Broken> {
    let clock = ManualClock::new();
    let policy = fx.env.policy.clone().with_grant("send_email_draft").with_limit("send_email_draft", 3);
    // the gate's world: clones share its outbox, which the rules read
    let world = World::new(fx.env.world.clone());
    let mut gate = ToolGate::new(policy, world.clone());
    let mut queue = ApprovalQueue::new(ApprovalQueue::approvers_of(&fx.env.world), clock.shared());
    queue.ttl = APPROVAL_TTL;
    queue.max_open = APPROVAL_MAX_OPEN;
    let mut verdict = ApprovalVerdict::default();
    let mut parks = 0u32;
    for op in ops {
        let ids: Vec<String> = queue.requests.keys().cloned().collect();
        let request = |i: u8| {
            usize::from(i).checked_rem(ids.len()).and_then(|n| ids.get(n)).cloned().unwrap_or_else(|| "req-0".into())
        };
        let before = statuses(&queue);
        let sent_before = world.outbox.len();
        let now = queue.now();
        let code = match op {
            ApprovalOp::Park { run } => {
                let (run_id, user) = pick(&APPROVAL_RUNS, *run).unwrap_or(APPROVAL_RUNS[0]);
                parks += 1;
                let call = ToolCall::new(
                    format!("{run_id}-c{parks}"),
                    "send_email_draft",
                    json!({"to": format!("{user}@example.com"), "subject": format!("Park {parks}"),
                           "body": "Your return is approved.", "idempotency_key": "model-key"}),
                );
                match gate.run(&call, CallContext::new("reply", run_id, user)) {
                    GateOutcome::NeedsApproval { pending_id } => match gate.pending().get(&pending_id) {
                        Some(action) => match queue.submit(action) {
                            Ok(_) => "park:ok".to_string(),
                            Err(e) => format!("park:{}", e.to_string().split(':').next().unwrap_or_default()),
                        },
                        None => return Err(Broken { rule: "parked_action_is_kept", detail: pending_id }),
                    },
                    other => format!("park:{}", other.code()),
                }
            }
            ApprovalOp::Approve { request: r, actor } => {
                let (id, actor) = (request(*r), pick(&ACTORS, *actor).unwrap_or_default());
                let req = queue.requests.get(&id).cloned();
                let decision = queue.approve(&id, actor, &mut gate);
                if decision.code == DecisionCode::Ok {
                    let Some(req) = req else {
                        return Err(Broken { rule: "approval_of_a_known_request", detail: id });
                    };
                    let parked = gate.pending().get(&req.pending_id).filter(|p| p.run_id == req.run_id);
                    let rules = req.status == RequestStatus::Pending
                        && now < req.expires_at
                        && queue.approvers.contains(actor)
                        && actor != req.requested_by;
                    ensure(rules, "approval_needs_an_unexpired_non_self_decision", || {
                        format!("{id} by {actor:?} at {now} ({:?}, expires {})", req.status, req.expires_at)
                    })?;
                    let ran = matches!(decision.outcome, Some(GateOutcome::Ok(_)));
                    let executed = parked.is_some_and(|p| p.status == PendingStatus::Executed);
                    ensure(ran && executed, "an_approval_runs_its_action", || format!("{:?}", decision.outcome))?;
                    let sent = world.outbox.sent();
                    let new = sent.get(sent_before..).unwrap_or_default();
                    let args = parked.map(|p| &p.call.arguments);
                    let field = |k: &str| args.and_then(|a| a.get(k)).and_then(|v| v.as_str()).unwrap_or_default();
                    let exact = new.len() == 1
                        && new[0].to == field("to")
                        && new[0].subject == field("subject")
                        && new[0].body == field("body")
                        && new[0].idempotency_key == field("idempotency_key");
                    ensure(exact, "an_approval_sends_exactly_the_reviewed_call_once", || format!("{new:?}"))?;
                } else {
                    ensure(decision.outcome.is_none(), "a_refused_approval_runs_nothing", || {
                        format!("{} with {:?}", decision.code.as_str(), decision.outcome)
                    })?;
                }
                format!("approve:{}", decision.code.as_str())
            }
            ApprovalOp::Deny { request: r, actor } => {
                let (id, actor) = (request(*r), pick(&ACTORS, *actor).unwrap_or_default());
                format!("deny:{}", queue.deny(&id, actor, &mut gate).as_str())
            }
            ApprovalOp::Cancel { request: r, actor } => {
                let (id, actor) = (request(*r), pick(&ACTORS, *actor).unwrap_or_default());
                format!("cancel:{}", queue.cancel(&id, actor, &mut gate).as_str())
            }
            ApprovalOp::Wait { secs } => {
                clock.advance(Duration::from_secs(u64::from(*secs)));
                "wait".to_string()
            }
            ApprovalOp::Edit { request: r } => {
                let id = request(*r);
                let target = queue.requests.get(&id).map(|q| (q.run_id.clone(), q.pending_id.clone()));
                // an edit of the stored action, as a tampered store would load it
                let edited = target.and_then(|(run, pa)| gate.pending().get(&pa).filter(|p| p.run_id == run).cloned());
                if let Some(mut action) = edited {
                    if let Some(obj) = action.call.arguments.as_object_mut() {
                        obj.insert("to".into(), json!("attacker@evil.example"));
                    }
                    gate.restore_pending(action);
                }
                "edit".to_string()
            }
            ApprovalOp::Replay { request: r } => match queue.token_for(&request(*r)) {
                None => "replay:no_token".to_string(),
                Some(token) => match gate.execute_approved(&token) {
                    Ok(GateOutcome::Ok(v)) if v.get("replayed") == Some(&json!(true)) => "replay:replayed".into(),
                    Ok(other) => format!("replay:{}", other.code()),
                    Err(_) => "replay:refused".into(),
                },
            },
        };
        // a decision applies at most once; only approvals send, and only once
        let after = statuses(&queue);
        for (id, was) in &before {
            let is = after.get(id).copied();
            ensure(*was == RequestStatus::Pending || is == Some(*was), "a_decided_request_stays_decided", || {
                format!("{id} went from {was} to {is:?} on {op:?}")
            })?;
        }
        let approved_now = code == "approve:ok";
        let grew = world.outbox.len().saturating_sub(sent_before);
        ensure(grew == usize::from(approved_now), "only_an_approval_sends_and_only_once", || {
            format!("{grew} sent on {op:?} ({code})")
        })?;
        outbox_holds(&gate, &world, &queue)?;
        verdict.codes.push(code);
    }
    verdict.emails = world.outbox.len();
    Ok(verdict)
}

/// Every e-mail belongs to exactly one executed action whose request was approved by an
/// approver other than its requester before it expired; every executed action sent one.
fn outbox_holds(gate: &ToolGate, world: &World, queue: &ApprovalQueue) -> Result<(), Broken> {
    let sent = world.outbox.sent();
    let executed: Vec<_> = gate.pending().values().filter(|p| p.status == PendingStatus::Executed).collect();
    ensure(sent.len() == executed.len(), "one_email_per_executed_action", || {
        format!("{} sent, {} executed", sent.len(), executed.len())
    })?;
    for mail in &sent {
        let action = executed
            .iter()
            .find(|p| p.call.arguments.get("idempotency_key").and_then(|k| k.as_str()) == Some(&mail.idempotency_key));
        let request =
            action.and_then(|p| queue.requests.values().find(|r| r.run_id == p.run_id && r.pending_id == p.id));
        let approved = request.is_some_and(|r| {
            r.status == RequestStatus::Approved
                && r.decided_by.as_ref().is_some_and(|by| queue.approvers.contains(by) && *by != r.requested_by)
                && r.decided_at.is_some_and(|t| t < r.expires_at)
        });
        ensure(approved, "every_email_has_an_approved_unexpired_non_self_decision", || {
            format!("{} under {:?}", mail.id, request.map(|r| (&r.id, r.status, &r.decided_by)))
        })?;
    }
    Ok(())
}
