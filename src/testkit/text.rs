//! Invariants of the text checks' two front doors, for the `fold` and `redact` fuzz
//! targets and the replay of their seeds:
//! - folding is idempotent, leaves no hidden character, changes no ASCII text, and every
//!   text check judges a text and its folded form alike;
//! - redaction never shows a registered secret, leaves a text with nothing to hide as it
//!   was (borrowed), and its output holds nothing the same checks still call a secret or
//!   personal data.

use std::borrow::Cow;

use super::{Broken, ensure};
use crate::security::{fold, has_personal_data, has_secret, is_hidden, is_instruction_like, redact, register_secret};

/// The secret the fuzz harness registers, as a process would register its API key: an
/// unshaped value a fuzzer's input may contain.
pub const FUZZ_SECRET: &str = "fuzz-registered-secret-value";

/// Folds `text` and checks the folding rules; returns the folded text.
///
/// # Errors
/// [`Broken`] when a rule does not hold.
pub fn check_fold(text: &str) -> Result<String, Broken> {
    let folded = fold(text);
    ensure(fold(&folded) == folded, "fold_idempotent", || format!("{text:?} -> {folded:?}"))?;
    ensure(!folded.chars().any(is_hidden), "fold_hides_nothing", || format!("{folded:?}"))?;
    ensure(!text.is_ascii() || matches!(folded, Cow::Borrowed(_)), "fold_keeps_ascii", || format!("{text:?}"))?;
    ensure(is_instruction_like(text) == is_instruction_like(&folded), "fold_same_instruction_verdict", || {
        format!("{text:?}")
    })?;
    ensure(has_personal_data(text) == has_personal_data(&folded), "fold_same_personal_verdict", || {
        format!("{text:?}")
    })?;
    ensure(has_secret(text) == has_secret(&folded), "fold_same_secret_verdict", || format!("{text:?}"))?;
    Ok(folded.into_owned())
}

/// Redacts `text` (with [`FUZZ_SECRET`] registered) and checks the redaction rules;
/// returns the redacted text.
///
/// # Errors
/// [`Broken`] when a rule does not hold.
pub fn check_redact(text: &str) -> Result<String, Broken> {
    register_secret(FUZZ_SECRET);
    let red = redact(text);
    ensure(!red.contains(FUZZ_SECRET), "redact_hides_registered", || format!("{text:?} -> {red:?}"))?;
    let nothing = !has_secret(text) && !has_personal_data(text);
    ensure(!nothing || red == text, "redact_keeps_clean_text", || format!("{text:?} -> {red:?}"))?;
    ensure(!has_secret(&red), "redact_leaves_no_secret", || format!("{text:?} -> {red:?}"))?;
    ensure(!has_personal_data(&red), "redact_leaves_no_personal_data", || format!("{text:?} -> {red:?}"))?;
    Ok(red.into_owned())
}
