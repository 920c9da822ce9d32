//! The human side: which actions need a person (risk classes), the approval queue with
//! its rules, fatigue and batching, compensation (saga), signed checkpoints and resuming a
//! run after a decision or a crash, and approver identity (Ed25519 keys, signed
//! decisions).

pub mod approvals;
pub mod checkpoint;
pub mod effects;
pub mod identity;
pub mod resume;
pub mod risk;

pub use approvals::{
    APPROVER_ROLE, ApprovalError, ApprovalQueue, ApprovalRequest, AuditLine, DEFAULT_MAX_OPEN, DEFAULT_TTL, Decision,
    DecisionCode, Fatigue, FatigueRule, MAX_CLOCK_SKEW, MAX_LIFETIME, RequestStatus, fatigue, fatigue_with,
    make_batches, preview,
};
pub use checkpoint::{
    CHECKPOINT_FORMAT, Checkpoint, CheckpointCode, CheckpointError, MAX_KEY_FILE_BYTES, MIN_KEY_BYTES, SIGNING_KEY_ENV,
    SIGNING_KEY_FILE_ENV, SigningKey, read_small_file,
};
pub use effects::{SagaReport, Step, order_problems, run_saga};
pub use identity::{
    APPROVER_KEY_FORMAT, Approver, ApproverKey, DECISION_FORMAT, DecisionStatement, IdentityCode, IdentityError,
    SignedDecision, key_fingerprint,
};
pub use resume::{ResumeError, Resumed, Verdict, cancel_waiting, resume_run, resume_with_decision};
pub use risk::{EFFECTS, Effect, Level, Risk, classify, policy_problems};
