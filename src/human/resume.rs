//! Resume: continue a run from a checkpoint, apply a person's decision to a parked run,
//! or withdraw it. Every function continues through [`Agent::drive`], the same loop a
//! fresh run uses, so a resumed run cannot drift from a plain one.
//!
//! An approved action runs once through the gate, shows in the trace as a `human` line
//! and its result becomes an observation. A second resume of the same parked checkpoint
//! (say, after a crash) finds the request approved and replays the stored result: nothing
//! is sent twice. A refused decision changes nothing: the run stays parked.

use serde::{Deserialize, Serialize};

use super::approvals::{ApprovalQueue, DecisionCode, RequestStatus};
use super::checkpoint::Checkpoint;
use crate::agent::{Agent, AgentError, AgentState, Run, StateError, Status, StopReason, TraceKind};
use crate::gate::{GateCode, GateOutcome};

/// Errors that keep a decision from being applied at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// The run could not be carried on.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A state rule was broken.
    #[error(transparent)]
    State(#[from] StateError),
    /// The checkpoint is not parked on this pending request.
    #[error("run {run_id} is not waiting for request {request_id}")]
    NotWaiting {
        /// The checkpoint's run.
        run_id: String,
        /// The request.
        request_id: String,
    },
}

/// What a person decided on a parked run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeVerdict {
    /// Run the action and continue.
    Approve,
    /// Refuse the action; the run stops as `denied`.
    Deny,
    /// Refuse the action and hand the refusal to the model as an observation.
    DenyReplan,
}

/// A decision applied to a parked run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// What the queue answered (`ok`, or the rule that refused).
    pub code: DecisionCode,
    /// The run afterwards: continued, stopped, or unchanged (still parked).
    pub run: Run,
    /// True when an earlier approval's stored result was replayed.
    pub replayed: bool,
}

/// Continues a checkpoint in `agent` (e.g. a new process after a crash). A running
/// checkpoint continues through the loop; a parked or final one is returned unchanged.
///
/// # Errors
/// [`AgentError`] as [`Agent::drive`].
pub async fn resume_run(agent: &mut Agent, checkpoint: Checkpoint) -> Result<Run, AgentError> {
    if checkpoint.state.status() == &Status::Running {
        return agent.drive(checkpoint.state, checkpoint.progress).await;
    }
    Ok(checkpoint.into_run())
}

fn unchanged(code: DecisionCode, checkpoint: Checkpoint) -> Resumed {
    Resumed { code, run: checkpoint.into_run(), replayed: false }
}

fn parked_on(state: &AgentState, run_id: &str, pending_id: &str) -> bool {
    state.run_id() == run_id && state.pending_id() == Some(pending_id)
}

/// Applies `actor`'s verdict on request `request_id` to the parked `checkpoint`.
///
/// Approve: when the queue's rules pass, the action runs once and the run continues with
/// its result. Deny: the run stops as `denied`; with [`ResumeVerdict::DenyReplan`] the refusal
/// becomes an observation and the model continues. A refused decision (wrong person, own
/// request, changed arguments) leaves the run parked. An expired request is a no: the run
/// stops as `denied`. A request decided earlier is applied as recorded (an approval's
/// stored result is replayed).
///
/// # Errors
/// [`ResumeError::NotWaiting`] when the request is pending but the checkpoint is not
/// parked on it; [`ResumeError::Agent`] when the continued run cannot be carried out.
pub async fn resume_with_decision(
    agent: &mut Agent,
    queue: &mut ApprovalQueue,
    checkpoint: Checkpoint,
    request_id: &str,
    actor: &str,
    verdict: ResumeVerdict,
) -> Result<Resumed, ResumeError> {
    let Some(req) = queue.requests.get(request_id).cloned() else {
        return Ok(unchanged(DecisionCode::UnknownRequest, checkpoint));
    };
    let parked = parked_on(&checkpoint.state, &req.run_id, &req.pending_id);
    if req.status == RequestStatus::Pending && !parked {
        return Err(ResumeError::NotWaiting { run_id: checkpoint.state.run_id().into(), request_id: req.id });
    }
    let code = match verdict {
        ResumeVerdict::Approve => {
            // awaited: an MCP server's tool answers later, a built-in one at once
            let decision = queue.approve_async(request_id, actor, &mut agent.gate).await;
            if let (DecisionCode::Ok, Some(outcome)) = (decision.code, decision.outcome) {
                let run = continue_with(agent, checkpoint, &req.tool, outcome).await?;
                return Ok(Resumed { code: DecisionCode::Ok, run, replayed: false });
            }
            decision.code
        }
        ResumeVerdict::Deny | ResumeVerdict::DenyReplan => queue.deny(request_id, actor, &mut agent.gate),
    };
    match code {
        DecisionCode::Ok => {
            let run = denied(agent, checkpoint, &req.tool, verdict == ResumeVerdict::DenyReplan).await?;
            Ok(Resumed { code, run, replayed: false })
        }
        DecisionCode::Expired if parked => {
            let run = stop(agent, checkpoint, StopReason::Denied, "expired", &req.tool)?;
            Ok(Resumed { code, run, replayed: false })
        }
        DecisionCode::NotPending if parked => apply_recorded(agent, queue, checkpoint, request_id).await,
        _ => Ok(unchanged(code, checkpoint)),
    }
}

/// Withdraws request `request_id` of the parked `checkpoint` as `actor` (the requester or
/// an approver); the run stops as `cancelled` and nothing runs. A refusal leaves it parked.
///
/// # Errors
/// As [`resume_with_decision`].
pub fn cancel_waiting(
    agent: &mut Agent,
    queue: &mut ApprovalQueue,
    checkpoint: Checkpoint,
    request_id: &str,
    actor: &str,
) -> Result<Resumed, ResumeError> {
    let Some(req) = queue.requests.get(request_id).cloned() else {
        return Ok(unchanged(DecisionCode::UnknownRequest, checkpoint));
    };
    if req.status == RequestStatus::Pending && !parked_on(&checkpoint.state, &req.run_id, &req.pending_id) {
        return Err(ResumeError::NotWaiting { run_id: checkpoint.state.run_id().into(), request_id: req.id });
    }
    let code = queue.cancel(request_id, actor, &mut agent.gate);
    if code != DecisionCode::Ok {
        return Ok(unchanged(code, checkpoint));
    }
    let run = stop(agent, checkpoint, StopReason::Cancelled, "cancelled", &req.tool)?;
    Ok(Resumed { code, run, replayed: false })
}

/// A request decided earlier, applied again to a checkpoint still parked on it.
async fn apply_recorded(
    agent: &mut Agent,
    queue: &ApprovalQueue,
    checkpoint: Checkpoint,
    request_id: &str,
) -> Result<Resumed, ResumeError> {
    let code = DecisionCode::NotPending;
    let Some(req) = queue.requests.get(request_id).cloned() else {
        return Ok(unchanged(DecisionCode::UnknownRequest, checkpoint));
    };
    let run = match req.status {
        RequestStatus::Approved => {
            let Some(token) = queue.token_for(request_id) else {
                return Ok(unchanged(code, checkpoint));
            };
            let outcome = agent
                .gate
                .execute_approved(&token)
                .unwrap_or_else(|e| GateOutcome::Failed { code: GateCode::NotRunnable, message: e.to_string() });
            let replayed =
                matches!(&outcome, GateOutcome::Ok(v) if v.get("replayed") == Some(&serde_json::Value::Bool(true)));
            let run = continue_with(agent, checkpoint, &req.tool, outcome).await?;
            return Ok(Resumed { code, run, replayed });
        }
        RequestStatus::Denied => stop(agent, checkpoint, StopReason::Denied, "denied", &req.tool)?,
        RequestStatus::Expired => stop(agent, checkpoint, StopReason::Denied, "expired", &req.tool)?,
        RequestStatus::Cancelled => stop(agent, checkpoint, StopReason::Cancelled, "cancelled", &req.tool)?,
        RequestStatus::Pending => return Ok(unchanged(code, checkpoint)),
    };
    Ok(Resumed { code, run, replayed: false })
}

/// The approved action's outcome becomes an observation; the loop continues.
async fn continue_with(
    agent: &mut Agent,
    checkpoint: Checkpoint,
    tool: &str,
    outcome: GateOutcome,
) -> Result<Run, AgentError> {
    let Checkpoint { state, mut progress } = checkpoint;
    let step = state.step();
    let running = state.resume()?;
    let (ok, text) = outcome.observation();
    progress.trace.add(step, TraceKind::Human, outcome.code(), tool);
    let fact = outcome.fact(agent.gate().environment(), tool);
    let (running, _) = running.observe_with_fact(ok, tool, &text, fact)?;
    agent.drive(running, progress).await
}

/// A denial: the run stops as `denied`, or the refusal goes to the model to replan.
async fn denied(agent: &mut Agent, checkpoint: Checkpoint, tool: &str, replan: bool) -> Result<Run, AgentError> {
    if !replan {
        return stop(agent, checkpoint, StopReason::Denied, "denied", tool);
    }
    let Checkpoint { state, mut progress } = checkpoint;
    progress.trace.add(state.step(), TraceKind::Human, "denied", tool);
    let (running, _) = state.resume()?.observe(false, tool, "error denied: a person refused this action")?;
    agent.drive(running, progress).await
}

fn stop(
    agent: &Agent,
    checkpoint: Checkpoint,
    reason: StopReason,
    code: &'static str,
    tool: &str,
) -> Result<Run, AgentError> {
    let Checkpoint { state, mut progress } = checkpoint;
    progress.trace.add(state.step(), TraceKind::Human, code, tool);
    let stopped = state.stop(reason)?;
    agent.end(stopped, progress)
}
