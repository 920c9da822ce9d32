//! The go/no-go list. Code checks what code can ([`automatic`]: budgets set, policy
//! classified, grants only for approval-level tools, no write tool in a role scope, every
//! stop reason reached by some test or row); a named owner attests the rest
//! ([`Attestation`]). [`go_no_go`] says go only when every check passes and every
//! attestation is given by someone: a missing item is no-go.

use crate::codes::codes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::agent::{RunBudget, StopReason};
use crate::gate::{Access, Policy};
use crate::human::{Level, classify, policy_problems};

codes! {
    /// What code checks.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum AutoCheck {
        /// Every limit of the run budget is above zero.
        BudgetsSet = "budgets_set",
        /// The policy has no mislabelled or unclassified tool ([`policy_problems`] is empty).
        PolicyClassified = "policy_classified",
        /// Every grant is for a tool that needs approval.
        GrantsApprovalOnly = "grants_approval_only",
        /// No role's tool scope holds a write tool.
        NoWriteInRoleScope = "no_write_in_role_scope",
        /// Every stop reason is reached by some test or table row.
        ReasonsReached = "reasons_reached",
    }
}

/// Every automatic check, in a fixed order.
pub const AUTOMATIC: [AutoCheck; 5] = [
    AutoCheck::BudgetsSet,
    AutoCheck::PolicyClassified,
    AutoCheck::GrantsApprovalOnly,
    AutoCheck::NoWriteInRoleScope,
    AutoCheck::ReasonsReached,
];

codes! {
    /// What a named owner attests; code cannot check these.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Attestation {
        /// Approvers exist, are reachable and know what they approve.
        ApproverReady = "approver_ready",
        /// A baseline was measured on your own tasks.
        Baseline = "baseline",
        /// There is a kill switch, and someone has used it.
        KillSwitch = "kill_switch",
        /// Logs were read for secrets and personal data.
        LogsRedacted = "logs_redacted",
        /// One person owns the system.
        Owner = "owner",
        /// A rollback was rehearsed.
        RollbackTested = "rollback_tested",
    }
}

/// Every attestation, in a fixed order.
pub const MANUAL: [Attestation; 6] = [
    Attestation::ApproverReady,
    Attestation::Baseline,
    Attestation::KillSwitch,
    Attestation::LogsRedacted,
    Attestation::Owner,
    Attestation::RollbackTested,
];

/// One attestation, given by a named person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attested {
    /// What is attested.
    pub item: Attestation,
    /// Who attests it; an empty or blank name does not count.
    pub by: String,
}

/// What the automatic checks read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChecklistInput<'a> {
    /// The deployed policy.
    pub policy: &'a Policy,
    /// The run budget.
    pub budget: &'a RunBudget,
    /// Role → the tools in its scope (empty for a single agent).
    pub role_scopes: &'a BTreeMap<String, BTreeSet<String>>,
    /// Stop reasons reached by some test or table row.
    pub reached: &'a BTreeSet<StopReason>,
}

/// Runs the automatic checks; every check has an entry.
pub fn automatic(input: &ChecklistInput<'_>) -> BTreeMap<AutoCheck, bool> {
    let b = input.budget;
    let budgets = b.max_steps > 0
        && !b.max_seconds.is_zero()
        && b.max_cost > rust_decimal::Decimal::ZERO
        && b.max_stuck > 0
        && b.max_output_tokens > 0;
    let classified = policy_problems(input.policy).is_empty();
    let grants = input.policy.grants.iter().all(|g| classify(g).level == Level::Approve);
    let scopes = input
        .role_scopes
        .values()
        .flatten()
        .all(|t| input.policy.access_of(t) == Access::Read && classify(t).level != Level::Approve);
    let reasons = StopReason::ALL.iter().all(|r| input.reached.contains(r));
    BTreeMap::from([
        (AutoCheck::BudgetsSet, budgets),
        (AutoCheck::PolicyClassified, classified),
        (AutoCheck::GrantsApprovalOnly, grants),
        (AutoCheck::NoWriteInRoleScope, scopes),
        (AutoCheck::ReasonsReached, reasons),
    ])
}

/// The stop reasons `reached` misses, in [`StopReason::ALL`] order.
pub fn unreached(reached: &BTreeSet<StopReason>) -> Vec<StopReason> {
    StopReason::ALL.iter().filter(|r| !reached.contains(r)).copied().collect()
}

/// Go or no-go, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GoNoGo {
    /// True only when nothing fails and nothing is unattested.
    pub go: bool,
    /// Automatic checks that failed (or have no result).
    pub failing: Vec<AutoCheck>,
    /// Attestations nobody gave.
    pub unattested: Vec<Attestation>,
}

impl fmt::Display for GoNoGo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failing: Vec<_> = self.failing.iter().map(|c| c.as_str()).collect();
        let unattested: Vec<_> = self.unattested.iter().map(|a| a.as_str()).collect();
        write!(
            f,
            "{} failing=[{}] unattested=[{}]",
            if self.go { "go" } else { "no-go" },
            failing.join(", "),
            unattested.join(", ")
        )
    }
}

/// The verdict from the automatic results and the attestations given.
pub fn go_no_go(auto: &BTreeMap<AutoCheck, bool>, attested: &[Attested]) -> GoNoGo {
    let failing: Vec<AutoCheck> = AUTOMATIC.into_iter().filter(|c| auto.get(c) != Some(&true)).collect();
    let unattested: Vec<Attestation> = MANUAL
        .into_iter()
        .filter(|item| !attested.iter().any(|a| a.item == *item && !a.by.trim().is_empty()))
        .collect();
    GoNoGo { go: failing.is_empty() && unattested.is_empty(), failing, unattested }
}
