//! The attack-class rows, `data/attack_classes.jsonl`: single and multi rows for the
//! attacks beyond a planted note (a compromised planner, an agent in the middle, a
//! colluding researcher and reviewer, a self-replicating payload, a fake tool error, a
//! payload persisted through memory), each under the default defenses and with the
//! defense that stops it turned off. `rolegate suite` runs them after the single and
//! multi tables.

use super::multi_scenarios::{AnyRow, parse_any_table};
use crate::lab::ScenarioError;

/// The bundled attack-class rows.
pub const BUNDLED_CLASSES: &str = include_str!("../../data/attack_classes.jsonl");

/// The bundled attack-class rows, parsed like any table of single and multi rows.
///
/// # Errors
/// Only if the bundled file were broken (a test guards it).
pub fn bundled_attack_classes() -> Result<Vec<AnyRow>, ScenarioError> {
    parse_any_table(BUNDLED_CLASSES, "data/attack_classes.jsonl")
}
