//! `rolegate check envelopes|proposals|memory`: each checker on a file of good and bad
//! lines mixed gives one verdict per line, the code the library gives, and goes on after a
//! bad line; the binary's exit codes.

use rolegate::suite::{CheckKind, Checker, LineVerdict};
use std::io::Write;
use std::process::{Command, Stdio};

fn path(name: &str) -> String {
    format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn codes(kind: CheckKind, file: &str) -> Vec<(usize, String)> {
    let input = std::fs::read(path(file)).unwrap();
    let verdicts = Checker::new(kind, "kwame").unwrap().check_all(&input);
    verdicts.into_iter().map(|v| (v.line, v.code)).collect()
}

fn numbered(first: usize, codes: &[&str]) -> Vec<(usize, String)> {
    codes.iter().enumerate().map(|(i, c)| (first + i, (*c).to_string())).collect()
}

#[test]
fn envelopes_get_the_coordinators_codes_line_by_line() {
    let want = [
        "accept",
        "not_json",
        "no_route",
        "invalid_message",
        "unknown_kind",
        "instruction_like",
        "accept",
        "unsupported_claim",
        "accept",
        "unknown_source",
        "bad_line",
        "bad_line",
        "bad_line",
        "accept",
    ];
    assert_eq!(codes(CheckKind::Envelopes, "envelopes.jsonl"), numbered(2, &want));
}

#[test]
fn proposals_get_the_loops_parse_and_check_codes_line_by_line() {
    let want = [
        "ok",
        "repeated_call",
        "not_json",
        "invalid_proposal",
        "not_allowed",
        "ok",
        "unsupported_finish",
        "ok",
        "invalid_arguments",
        "bad_line",
        "bad_line",
        "bad_line",
    ];
    assert_eq!(codes(CheckKind::Proposals, "proposals.jsonl"), numbered(2, &want));
}

#[test]
fn memory_writes_get_the_write_codes_line_by_line() {
    let want = [
        "ok",
        "personal_data",
        "secret",
        "instruction_like",
        "other_user",
        "bad_key_or_source",
        "bad_line",
        "bad_line",
        "empty",
    ];
    assert_eq!(codes(CheckKind::Memory, "memory.jsonl"), numbered(2, &want));
}

#[test]
fn a_bad_line_says_why_and_ids_and_kinds_are_echoed() {
    let mut c = Checker::new(CheckKind::Envelopes, "kwame").unwrap();
    let v = c.check_all(b"{\"sender\": \"boss\", \"recipient\": \"researcher\", \"text\": \"{}\"}\n\xff\xfe\n");
    assert_eq!(v.len(), 2);
    assert!(v[0].error.as_deref().unwrap().starts_with("field `sender`: unknown variant `boss`"), "{v:?}");
    assert!(v[1].error.as_deref().unwrap().starts_with("not UTF-8"), "{v:?}");
    let good = r#"{"id": "b1", "sender": "planner", "recipient": "researcher", "text": "{\"kind\":\"brief\",\"question\":\"Status?\"}"}"#;
    let v = c.check_line(7, good);
    assert_eq!(
        v,
        LineVerdict { line: 7, id: Some("b1".into()), code: "accept".into(), kind: Some("brief".into()), error: None }
    );
}

fn rolegate(args: &[&str], stdin: Option<&[u8]>) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_binary_prints_one_json_verdict_per_line_and_exits_by_the_documented_codes() {
    for (what, file, lines) in
        [("envelopes", "envelopes.jsonl", 14), ("proposals", "proposals.jsonl", 12), ("memory", "memory.jsonl", 9)]
    {
        let (code, out) = rolegate(&["check", what, &path(file)], None);
        assert_eq!(code, Some(1), "{what}: some lines are refused or bad");
        let verdicts: Vec<LineVerdict> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(verdicts.len(), lines, "{what}");
        assert_eq!(
            verdicts,
            Checker::new(kind_of(what), "kwame").unwrap().check_all(&std::fs::read(path(file)).unwrap())
        );
    }
    let good = b"{\"key\": \"ticket-t-601\", \"text\": \"T-601 status is open\", \"source\": \"tool:get_ticket:o1\"}\n";
    let (code, out) = rolegate(&["check", "memory"], Some(good));
    assert_eq!((code, out.trim()), (Some(0), r#"{"line":1,"code":"ok"}"#));
    let (code, out) = rolegate(&["check", "proposals", "/nonexistent/proposals.jsonl"], None);
    assert_eq!((code, out.as_str()), (Some(2), ""));
}

fn kind_of(what: &str) -> CheckKind {
    match what {
        "envelopes" => CheckKind::Envelopes,
        "proposals" => CheckKind::Proposals,
        _ => CheckKind::Memory,
    }
}
