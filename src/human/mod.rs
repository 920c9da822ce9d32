//! The human side: which actions need a person (risk classes), the approval queue with
//! its rules, fatigue and batching, compensation (saga), signed checkpoints and resuming a
//! run after a decision or a crash, and approver identity (Ed25519 keys, signed
//! decisions).

pub(crate) mod approvals;
pub(crate) mod checkpoint;
pub(crate) mod effects;
pub(crate) mod identity;
pub(crate) mod resume;
pub(crate) mod risk;

pub(crate) use approvals::AuditLine;
pub use approvals::{
    ApprovalError, ApprovalQueue, ApprovalRequest, DecisionCode, MAX_LIFETIME, RequestStatus, fatigue, make_batches,
    preview,
};
#[cfg(feature = "testkit")]
pub(crate) use checkpoint::CHECKPOINT_FORMAT;
pub use checkpoint::{Checkpoint, CheckpointCode, CheckpointError, SigningKey};
pub use effects::{Step, order_problems, run_saga};
pub(crate) use identity::SignedDecision;
pub use identity::{Approver, ApproverKey, DecisionStatement, IdentityCode, IdentityError};
pub use resume::{ResumeError, ResumeVerdict, Resumed, cancel_waiting, resume_run, resume_with_decision};
pub(crate) use risk::Level;
pub use risk::{EFFECTS, classify, policy_problems};
