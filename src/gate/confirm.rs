//! Running or withdrawing a parked action once a person has decided on it. The call that
//! runs is the one stored when the action was parked, byte for byte: nothing a model says
//! after the person looked can change it. Who may decide is the caller's rule (the
//! PolicyPal card: the signed-in user; approvals: an approver who is not the requester);
//! the gate records who did, in the audit log, and runs each action at most once.

use super::{GateError, GateOutcome, PendingStatus, ToolGate};

impl ToolGate {
    /// Runs parked action `pending_id` exactly as parked, because `decided_by` confirmed
    /// it. A second confirmation of an executed action replays the stored result and runs
    /// nothing. Leaves two audit events: the decision (`confirmed`) and the outcome.
    ///
    /// # Errors
    /// [`GateError::UnknownPending`] for an unknown id; [`GateError::NotRunnable`] for an
    /// action that was denied or cancelled.
    pub fn execute_parked(&mut self, pending_id: &str, decided_by: &str) -> Result<GateOutcome, GateError> {
        let action = self.pending.get(pending_id).ok_or_else(|| GateError::UnknownPending(pending_id.into()))?;
        if matches!(action.status, PendingStatus::Pending | PendingStatus::Approved) {
            let (call, run_id) = (action.call.clone(), action.run_id.clone());
            self.record(&call, &run_id, decided_by, "confirmed");
        }
        self.run_parked_once(pending_id, |s| matches!(s, PendingStatus::Pending | PendingStatus::Approved))
    }

    /// Withdraws parked action `pending_id` because `decided_by` cancelled it; nothing runs.
    ///
    /// # Errors
    /// [`GateError::UnknownPending`] for an unknown id; [`GateError::NotRunnable`] unless
    /// the action is still pending.
    pub fn withdraw_parked(&mut self, pending_id: &str, decided_by: &str) -> Result<(), GateError> {
        let action = self.pending.get_mut(pending_id).ok_or_else(|| GateError::UnknownPending(pending_id.into()))?;
        if action.status != PendingStatus::Pending {
            return Err(GateError::NotRunnable { id: pending_id.into(), status: action.status });
        }
        action.status = PendingStatus::Cancelled;
        let (call, run_id) = (action.call.clone(), action.run_id.clone());
        self.record(&call, &run_id, decided_by, "cancelled");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::gate::{GateError, GateOutcome, PendingStatus, Policy, ToolGate};
    use crate::tools::ToolCall;
    use crate::world::{World, WorldData};
    use serde_json::json;
    use std::sync::Arc;

    fn parked() -> ToolGate {
        let world = World::new(Arc::new(WorldData::bundled().unwrap()));
        let mut g = ToolGate::new(Policy::bundled().unwrap().with_grant("send_email_draft"), world);
        let mail = ToolCall::new(
            "c1",
            "send_email_draft",
            json!({"to": "kwame@example.com", "subject": "s", "body": "b", "idempotency_key": "model-key"}),
        );
        assert_eq!(g.run(&mail, "reply", "r1", "kwame").code(), "needs_approval");
        g
    }

    #[test]
    fn a_confirmed_action_runs_once_as_parked_and_a_withdrawn_one_never() {
        let mut g = parked();
        let parked_args = g.pending["pa-1"].call.arguments.clone();
        assert!(matches!(g.execute_parked("pa-1", "kwame"), Ok(GateOutcome::Ok(_))));
        assert!(matches!(g.execute_parked("pa-1", "kwame"), Ok(GateOutcome::Ok(_))), "replayed");
        let sent = g.world.outbox.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(json!(sent[0].idempotency_key), parked_args["idempotency_key"]);
        let outcomes: Vec<_> = g.audit.iter().map(|e| (e.caller.as_str(), e.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [("kwame", "needs_approval"), ("kwame", "confirmed"), ("kwame", "ok"), ("kwame", "replayed")]
        );
        let mut g = parked();
        g.withdraw_parked("pa-1", "kwame").unwrap();
        assert_eq!(g.pending["pa-1"].status, PendingStatus::Cancelled);
        assert!(matches!(g.execute_parked("pa-1", "kwame"), Err(GateError::NotRunnable { .. })));
        assert!(matches!(g.withdraw_parked("pa-9", "kwame"), Err(GateError::UnknownPending(_))));
        assert!(g.world.outbox.is_empty());
    }
}
