//! Ready for the line reader of `rolegate check envelopes|proposals|memory` (issue 7),
//! which is not on `main` yet: the rules any such reader must keep, written against a
//! reader passed in as a closure, so the fuzz target is three lines once it lands:
//!
//! ```text
//! // fuzz/fuzz_targets/check_line.rs, when `eval::checkers::Checker` is on main:
//! let fresh = || { let mut c = Checker::new(kind.into(), "kwame").expect("bundled"); move |n, t: &str| c.check_line(n, t).code };
//! hold(check_line_reader(kind, fresh, &before, line));
//! ```
//!
//! and a line in `fuzz/run.sh`, seeds under `fuzz/seeds/check_line/`, and their replay in
//! `tests/hardening_props.rs`. What must hold, whatever the lines:
//! - every line gets one verdict from the closed set of its kind (the library's own codes,
//!   `ok`/`accept`, or `bad_line` for a line that cannot be checked);
//! - the same line gets the same verdict each time, and the verdict of a line does not
//!   depend on the lines read before it (each line is checked on its own).

use serde::de::DeserializeOwned;

use super::{Broken, ensure};
use crate::agent::{CheckCode, ProposalError};
use crate::memory::WriteCode;
use crate::multi::RejectCode;

/// What a `check` command reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// Messages between roles.
    Envelopes,
    /// Model proposals.
    Proposals,
    /// Memory writes.
    Memory,
}

/// The code of a line that could not be checked at all.
pub const BAD_LINE: &str = "bad_line";

fn is_a<T: DeserializeOwned>(code: &str) -> bool {
    serde_json::from_value::<T>(serde_json::Value::String(code.to_string())).is_ok()
}

/// True when `code` is a verdict a reader of `kind` may give: one of the library's codes
/// for it (taken from the code enums themselves, so the list cannot drift), `ok` or
/// `accept`, or [`BAD_LINE`].
pub fn known_code(kind: LineKind, code: &str) -> bool {
    matches!(code, "ok" | "accept" | BAD_LINE)
        || match kind {
            LineKind::Envelopes => is_a::<RejectCode>(code),
            LineKind::Proposals => is_a::<ProposalError>(code) || is_a::<CheckCode>(code),
            LineKind::Memory => is_a::<WriteCode>(code),
        }
}

/// Reads `line` with fresh readers made by `fresh` (a reader takes a 1-based line number
/// and the line's text, and answers the verdict's code): alone, twice, and after the
/// lines `before`.
///
/// # Errors
/// [`Broken`] when a rule of the module documentation fails.
pub fn check_line_reader<R: FnMut(usize, &str) -> String>(
    kind: LineKind,
    mut fresh: impl FnMut() -> R,
    before: &[&str],
    line: &str,
) -> Result<String, Broken> {
    let mut alone = fresh();
    let first = alone(1, line);
    ensure(known_code(kind, &first), "line_verdict_is_a_known_code", || format!("{kind:?}: {first:?}"))?;
    let again = alone(2, line);
    ensure(again == first, "line_verdict_is_deterministic", || format!("{first} then {again}"))?;
    let mut after = fresh();
    for (i, earlier) in before.iter().enumerate() {
        let code = after(i + 1, earlier);
        ensure(known_code(kind, &code), "line_verdict_is_a_known_code", || format!("{kind:?}: {code:?}"))?;
    }
    let late = after(before.len() + 1, line);
    ensure(late == first, "line_verdict_depends_on_its_line_alone", || {
        format!("{first} alone, {late} after {} lines", before.len())
    })?;
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi::{ClaimMode, Role, check_message};

    /// A stand-in reader for envelope lines `{"sender": …, "text": …}`, built from the
    /// coordinator's check (the real reader is issue 7's).
    fn stand_in() -> impl FnMut(usize, &str) -> String {
        |_, line: &str| {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { return BAD_LINE.into() };
            let (Some(sender), Some(text)) = (v["sender"].as_str(), v["text"].as_str()) else {
                return BAD_LINE.into();
            };
            let Ok(sender) = sender.parse::<Role>() else { return BAD_LINE.into() };
            check_message(sender, text, &[], ClaimMode::Strict).map_or_else(|c| c.as_str().into(), |_| "accept".into())
        }
    }

    const BRIEF: &str = r#"{"sender": "planner", "text": "{\"kind\":\"brief\",\"question\":\"Status of T-601?\"}"}"#;
    const DELEGATE: &str = r#"{"sender": "planner", "text": "{\"kind\":\"delegate\"}"}"#;

    #[test]
    fn a_reader_that_checks_each_line_on_its_own_keeps_the_rules() {
        for (line, code) in [(BRIEF, "accept"), (DELEGATE, "unknown_kind"), ("not json", BAD_LINE)] {
            assert_eq!(check_line_reader(LineKind::Envelopes, stand_in, &[BRIEF, DELEGATE, "x"], line).unwrap(), code);
        }
    }

    #[test]
    fn a_reader_with_memory_between_lines_or_codes_of_its_own_is_caught() {
        // refuses any line once it has seen another one
        let remembers = || {
            let mut seen: Vec<String> = Vec::new();
            move |_: usize, line: &str| {
                let other = seen.iter().any(|s| s != line);
                seen.push(line.to_string());
                if other { "unknown_kind".to_string() } else { "accept".to_string() }
            }
        };
        let broken = check_line_reader(LineKind::Envelopes, remembers, &[DELEGATE], BRIEF).unwrap_err();
        assert_eq!(broken.rule, "line_verdict_depends_on_its_line_alone");
        let invented = || |_: usize, _: &str| "looks_fine".to_string();
        let broken = check_line_reader(LineKind::Memory, invented, &[], BRIEF).unwrap_err();
        assert_eq!(broken.rule, "line_verdict_is_a_known_code");
        assert!(known_code(LineKind::Memory, "personal_data") && !known_code(LineKind::Envelopes, "personal_data"));
        assert!(known_code(LineKind::Proposals, "repeated_call") && known_code(LineKind::Proposals, "not_json"));
    }
}
