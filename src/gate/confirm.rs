//! Withdrawing a parked action a person cancelled (a PolicyPal card). Running one is
//! [`ToolGate::execute_approved`] with an [`ApprovalToken`](super::ApprovalToken), minted
//! for a confirmed card or by the approval queue: the call that runs is the one stored when
//! the action was parked, byte for byte, at most once.

use super::{GateError, PendingStatus, ToolGate};

impl ToolGate {
    /// Withdraws parked action `pending_id` because `decided_by` cancelled it; nothing runs.
    ///
    /// # Errors
    /// [`GateError::UnknownPending`] for an unknown id; [`GateError::NotRunnable`] unless
    /// the action is still pending.
    pub(crate) fn withdraw_parked(&mut self, pending_id: &str, decided_by: &str) -> Result<(), GateError> {
        let action = self.pending.get_mut(pending_id).ok_or_else(|| GateError::UnknownPending(pending_id.into()))?;
        if action.status != PendingStatus::Pending {
            return Err(GateError::NotRunnable { id: pending_id.into(), status: action.status });
        }
        action.status = PendingStatus::Cancelled;
        let (call, run_id) = (action.call.clone(), action.run_id.clone());
        self.record(&call, &run_id, decided_by, super::GateCode::Cancelled);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::gate::{
        ApprovalToken, CallContext, GateError, GateOutcome, PendingAction, PendingStatus, Policy, ToolGate,
    };
    use crate::tools::ToolCall;
    use crate::world::{World, WorldData};
    use serde_json::json;
    use std::sync::Arc;

    fn card_of(action: &PendingAction) -> ApprovalToken {
        ApprovalToken::for_card(&action.run_id, &action.id, &action.call, "kwame")
    }

    fn parked() -> ToolGate {
        let world = World::new(Arc::new(WorldData::bundled().unwrap()));
        let mut g = ToolGate::new(Policy::bundled().unwrap().with_grant("send_email_draft"), world);
        let mail = ToolCall::new(
            "c1",
            "send_email_draft",
            json!({"to": "kwame@example.com", "subject": "s", "body": "b", "idempotency_key": "model-key"}),
        );
        assert_eq!(g.run(&mail, CallContext::new("reply", "r1", "kwame")).code(), "needs_approval");
        g
    }

    #[test]
    fn a_confirmed_card_runs_once_as_parked_and_a_withdrawn_one_never() {
        let mut g = parked();
        let card = card_of(&g.pending()["pa-1"]);
        let parked_args = g.pending()["pa-1"].call.arguments.clone();
        assert!(matches!(g.execute_approved(&card), Ok(GateOutcome::Ok(_))));
        assert!(matches!(g.execute_approved(&card), Ok(GateOutcome::Ok(_))), "replayed");
        let sent = g.world().unwrap().outbox.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(json!(sent[0].idempotency_key), parked_args["idempotency_key"]);
        let outcomes: Vec<_> = g.audit().iter().map(|e| (e.caller.as_str(), e.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [("kwame", "needs_approval"), ("kwame", "confirmed"), ("kwame", "ok"), ("kwame", "replayed")]
        );
        let mut g = parked();
        let card = card_of(&g.pending()["pa-1"]);
        g.withdraw_parked("pa-1", "kwame").unwrap();
        assert_eq!(g.pending()["pa-1"].status, PendingStatus::Cancelled);
        assert!(matches!(g.execute_approved(&card), Err(GateError::NotRunnable { .. })));
        assert!(matches!(g.withdraw_parked("pa-9", "kwame"), Err(GateError::UnknownPending(_))));
        assert!(g.world().unwrap().outbox.is_empty());
    }

    #[test]
    fn a_card_token_runs_only_the_call_the_card_showed() {
        let mut g = parked();
        let mut shown = g.pending()["pa-1"].clone();
        shown.call.arguments["to"] = json!("evil@attacker.example");
        let forged = card_of(&shown);
        assert!(matches!(g.execute_approved(&forged), Err(GateError::ChangedSinceApproval(_))));
        assert!(g.world().unwrap().outbox.is_empty(), "nothing ran");
    }
}
