//! JUnit XML for CI systems: one `<testcase>` per scenario row (or per matrix
//! configuration), a `<failure>` with what differs when a row did not match its
//! expectation (or when a configuration that must stop every effect did not).

use std::fmt::Write;

use super::markup::escape;
use crate::suite::matrix::Matrix;
use crate::suite::run::RowResult;

/// One test case: class, name, the failure (message, details) if any, and its output.
struct Case {
    class: String,
    name: String,
    failure: Option<(String, String)>,
    out: String,
}

fn document(suite: &str, cases: &[Case]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(x, r#"<testsuites name="rolegate" tests="{}" failures="{failures}">"#, cases.len());
    let _ = writeln!(x, r#"  <testsuite name="{}" tests="{}" failures="{failures}">"#, escape(suite), cases.len());
    for Case { class, name, failure, out } in cases {
        // a mismatch quotes what the row expected and what ran: redacted like a trace
        let out = &crate::security::redact(out);
        let _ = write!(x, r#"    <testcase classname="{}" name="{}">"#, escape(class), escape(name));
        if let Some((message, details)) = failure {
            let (message, details) = (crate::security::redact(message), crate::security::redact(details));
            let _ =
                write!(x, r#"<failure message="{}" type="mismatch">{}</failure>"#, escape(&message), escape(&details));
        }
        let _ = writeln!(x, "<system-out>{}</system-out></testcase>", escape(out));
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// The rows' results as a JUnit document: class `rolegate.single` or `rolegate.multi`,
/// name the row id, the table line as output.
pub fn rows(results: &[RowResult]) -> String {
    let cases: Vec<_> = results
        .iter()
        .map(|r| {
            let failure = (!r.matches()).then(|| {
                let all = r.mismatches().join("\n");
                (r.mismatches().first().cloned().unwrap_or_default(), all)
            });
            Case { class: format!("rolegate.{}", r.table()), name: r.id().to_string(), failure, out: r.table_line() }
        })
        .collect();
    document("rolegate.suite", &cases)
}

/// The matrix as a JUnit document: one case per configuration, failing when it must
/// stop every effect and did not.
pub fn matrix(m: &Matrix) -> String {
    let cases: Vec<_> = m
        .figures
        .iter()
        .map(|f| {
            let failure = (!f.holds).then(|| {
                (
                    format!("{} effect(s) executed", f.attack_success.n),
                    format!(
                        "{}: attack success {} although a control that stops every effect is on",
                        f.label, f.attack_success
                    ),
                )
            });
            let out = format!(
                "utility {} | under attack {} | attack success {} | attempted {} | refusals {}",
                f.utility,
                f.utility_under_attack,
                f.attack_success,
                f.attempted,
                f.refusal_text()
            );
            Case { class: format!("rolegate.matrix.{}", f.config.design()), name: f.label.clone(), failure, out }
        })
        .collect();
    document("rolegate.matrix", &cases)
}
