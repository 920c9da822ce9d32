//! The rules of the line reader of `rolegate check envelopes|proposals|memory`
//! ([`Checker`]), whatever the lines:
//! - every line gets one verdict from the closed set of its kind (the library's own codes,
//!   `ok`/`accept`, or `bad_line` for a line that cannot be checked), carrying the line's
//!   own number;
//! - the same line gets the same verdict each time, and the verdict of a line does not
//!   depend on the lines read before it (each line is checked on its own).
//!
//! [`check_line_reader`] takes the reader as a closure, so the rules are tested against
//! readers that break them too; [`check_checker_line`] applies them to the real one, as the
//! `check_line` fuzz target does.

use serde::de::DeserializeOwned;

use super::{Broken, ensure};
use crate::agent::{CheckCode, ProposalError};
use crate::memory::WriteCode;
use crate::multi::RejectCode;
use crate::suite::checkers::{BAD_LINE, CheckKind, Checker};

/// What a `check` command reads (the checker's own kind).
pub use crate::suite::checkers::CheckKind as LineKind;

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

/// The longest run of earlier lines [`check_lines_input`] keeps.
pub const MAX_BEFORE: usize = 8;

/// Splits a fuzz input into a kind (its first byte), earlier lines and the line under test
/// (the last line). `None` for empty or non-UTF-8 input.
pub fn check_lines_input(data: &[u8]) -> Option<(CheckKind, Vec<&str>, &str)> {
    let (first, rest) = data.split_first()?;
    let kind = [CheckKind::Envelopes, CheckKind::Proposals, CheckKind::Memory][usize::from(*first) % 3];
    let text = std::str::from_utf8(rest).ok()?;
    let mut lines: Vec<&str> = text.split('\n').collect();
    let line = lines.pop()?;
    let skip = lines.len().saturating_sub(MAX_BEFORE);
    Some((kind, lines.split_off(skip), line))
}

/// The rules of the module applied to the real [`Checker`] of `kind` (user kwame), with
/// `line` read alone, twice, and after `before`; each verdict also carries the number of
/// its line. Returns the line's code.
///
/// # Errors
/// [`Broken`] when a rule fails, or when the bundled data do not load.
pub fn check_checker_line(kind: CheckKind, before: &[&str], line: &str) -> Result<String, Broken> {
    let wrong_number = std::cell::Cell::new(None);
    let code = check_line_reader(
        kind,
        || {
            let mut checker = Checker::new(kind, "kwame").ok();
            let wrong = &wrong_number;
            move |n: usize, text: &str| match checker.as_mut() {
                None => "no_bundled_data".to_string(),
                Some(c) => {
                    let verdict = c.check_line(n, text);
                    if verdict.line != n {
                        wrong.set(Some((n, verdict.line)));
                    }
                    verdict.code
                }
            }
        },
        before,
        line,
    )?;
    let wrong = wrong_number.get();
    ensure(wrong.is_none(), "line_verdict_carries_its_line_number", || format!("{wrong:?}"))?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIEF: &str = r#"{"sender": "planner", "recipient": "researcher", "text": "{\"kind\":\"brief\",\"question\":\"Status of T-601?\"}"}"#;
    const DELEGATE: &str = r#"{"sender": "planner", "recipient": "researcher", "text": "{\"kind\":\"delegate\"}"}"#;

    #[test]
    fn the_real_checker_keeps_the_rules_for_each_kind() {
        let memory_ok = r#"{"key": "ticket-t-601", "text": "T-601 status is open", "source": "tool:get_ticket:o1"}"#;
        let phone = r#"{"key": "fact", "text": "call him on +44 20 7946 0958", "source": "user:turn-1"}"#;
        let read = r#"{"text": "{\"action\": \"call\", \"tool\": \"get_ticket\", \"arguments\": {\"ticket_id\": \"T-602\"}}"}"#;
        let cases = [
            (CheckKind::Envelopes, BRIEF, "accept"),
            (CheckKind::Envelopes, DELEGATE, "unknown_kind"),
            (CheckKind::Envelopes, "not json", BAD_LINE),
            (CheckKind::Memory, memory_ok, "ok"),
            (CheckKind::Memory, phone, "personal_data"),
            (CheckKind::Proposals, read, "ok"),
            (CheckKind::Proposals, r#"{"text": "[1]"}"#, "not_json"),
        ];
        for (kind, line, code) in cases {
            let before = [BRIEF, DELEGATE, memory_ok, phone, read, "x", ""];
            assert_eq!(check_checker_line(kind, &before, line).unwrap(), code, "{kind:?} {line}");
        }
    }

    #[test]
    fn a_fuzz_input_is_a_kind_earlier_lines_and_the_last_line() {
        let (kind, before, line) = check_lines_input(b"\x01a\nb\nc").unwrap();
        assert_eq!((kind, before, line), (CheckKind::Proposals, vec!["a", "b"], "c"));
        let many = format!("\x02{}last", "x\n".repeat(20));
        let (kind, before, line) = check_lines_input(many.as_bytes()).unwrap();
        assert_eq!((kind, before.len(), line), (CheckKind::Memory, MAX_BEFORE, "last"));
        assert!(check_lines_input(b"").is_none() && check_lines_input(b"\x00\xff").is_none());
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
