//! A suite author's own scenario file (a new ticket, a payload no catalog holds, single
//! and multi rows, defenses) runs without code changes; `--format junit` parses as XML
//! and carries every mismatch; exit codes 0, 1 and 2.

use rolegate::eval::parse_any_table;
use rolegate::suite::run_rows;
use std::process::Command;
use std::sync::Arc;

use crate::util::{env, menv, temp_dir};

fn path(name: &str) -> String {
    format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn rolegate(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rolegate")).args(args).output().expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_user_written_file_with_a_new_payload_runs_and_every_row_matches() {
    let text = std::fs::read_to_string(path("user_rows.jsonl")).unwrap();
    let rows = parse_any_table(&text, "user_rows.jsonl").unwrap();
    assert_eq!(rows.len(), 7);
    let results = run_rows(rows, &Arc::new(env()), &menv(), None, None).await;
    for r in results {
        let r = r.unwrap();
        assert!(r.matches(), "{}", r.table_line());
    }
}

#[test]
fn junit_output_parses_as_xml_with_one_case_per_row_and_the_mismatches_escaped() {
    let (code, out, err) = rolegate(&["suite", "--format", "junit", &path("user_rows.jsonl")]);
    assert_eq!(code, Some(0), "{err}");
    let doc = roxmltree::Document::parse(&out).expect("JUnit output is XML");
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), 7);
    assert_eq!(cases[3].attribute("classname"), Some("rolegate.multi"));
    assert!(doc.descendants().all(|n| !n.has_tag_name("failure")));

    // a row whose expectation is wrong, and whose wrong expectation is full of markup
    let text = std::fs::read_to_string(path("user_rows.jsonl")).unwrap();
    let line = text.lines().find(|l| l.contains(r#""id": "u2""#)).unwrap();
    let bad =
        line.replace(r#""emails": 1"#, r#""emails": 0"#).replace(r#""calls": ["#, r#""calls": ["<b>&'x'\"</b>", "#);
    let dir = temp_dir("suite-junit");
    let file = dir.join("rows.jsonl");
    std::fs::write(&file, format!("{bad}\n")).unwrap();
    let (code, out, _) = rolegate(&["suite", "--format", "junit", file.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let doc = roxmltree::Document::parse(&out).expect("JUnit output with markup in it is still XML");
    let failure = doc.descendants().find(|n| n.has_tag_name("failure")).expect("a failure");
    let details = failure.text().unwrap_or_default();
    assert!(details.contains(r#"<b>&'x'\"</b>"#) && details.contains("emails: expected 0, got 1"), "{details}");
    let suites = doc.root_element();
    assert_eq!((suites.attribute("tests"), suites.attribute("failures")), (Some("1"), Some("1")));
}

#[test]
fn unusable_input_is_exit_code_two_with_the_place_named() {
    let (code, _, err) = rolegate(&["suite", "/nonexistent/rows.jsonl"]);
    assert_eq!(code, Some(2), "{err}");
    let dir = temp_dir("suite-bad-row");
    let file = dir.join("rows.jsonl");
    std::fs::write(&file, "# mine\n{\"id\": \"x\", \"model\": \"sensible\", \"user\": \"kwame\", \"task\": \"triage\", \"goal\": \"g\", \"attack\": {\"payload\": \"a99\", \"into\": \"T-601\"}, \"expect\": {\"status\": \"done\", \"reason\": \"done\", \"calls\": [], \"emails\": 0}}\n").unwrap();
    let (code, _, err) = rolegate(&["suite", file.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("rows.jsonl:2: field `attack.payload`: no attack \"a99\""), "{err}");
    let (code, _, err) = rolegate(&["suite", "--matrix", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn the_matrix_runs_from_the_command_line_with_its_own_task_and_catalog_files() {
    let tasks = path("matrix_tasks.jsonl");
    let attacks = path("matrix_attacks.jsonl");
    let args = ["suite", "--matrix", "--tasks", &tasks, "--attacks", &attacks];
    let (code, out, err) = rolegate(&[&args[..], &["--format", "jsonl"]].concat());
    assert_eq!(code, Some(0), "{err}");
    let all: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // a line per configuration (the 24, then the same 24 with the information-flow
    // defense on), then a line per cell
    let lines: Vec<&serde_json::Value> = all.iter().filter(|l| l["kind"] == "configuration").collect();
    assert_eq!(lines.len(), 48);
    assert_eq!(all.iter().filter(|l| l["kind"] == "cell").count(), 144);
    assert_eq!(lines[0]["design"], "single");
    assert_eq!(lines[0]["utility"]["of"], 1);
    assert_eq!(lines[0]["attack_success"]["of"], 2);
    let (code, out, _) = rolegate(&[&args[..], &["--format", "junit"]].concat());
    assert_eq!(code, Some(0));
    let doc = roxmltree::Document::parse(&out).expect("matrix JUnit is XML");
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("testcase")).count(), 48);
}
