//! Every parser of the single-agent half given garbage, truncated, oversized and
//! unknown-field input: a named code or a typed error, never a panic.

use rolegate::agent::{AgentState, ProposalError, parse_proposal};
use rolegate::cost::PriceTable;
use rolegate::eval::{parse_single_row, parse_single_table};
use rolegate::gate::Policy;
use rolegate::lab::ScenarioError;
use rolegate::tools::Registry;
use rolegate::world::WorldData;
use serde_json::json;

const GOOD_ROW: &str = r#"{"id": "x1", "model": "sensible", "user": "kwame", "task": "triage", "goal": "Check T-601.", "expect": {"status": "done", "reason": "done", "calls": ["get_ticket"], "emails": 0}}"#;

fn junk() -> Vec<String> {
    vec![
        String::new(),
        "\u{0}\u{1}\u{2}".into(),
        "not json at all".into(),
        "{".into(),
        "{\"a\":".into(),
        "[".repeat(100_000),
        "{\"a\":".repeat(50_000),
        "\"just a string\"".into(),
        "null".into(),
        "1e999999".into(),
        "\u{FEFF}{}".into(),
        "x".repeat(1_000_000),
    ]
}

#[test]
fn proposals_give_not_json_or_invalid_proposal() {
    for text in junk() {
        let code = parse_proposal(&text).unwrap_err();
        assert!(matches!(code, ProposalError::NotJson | ProposalError::InvalidProposal));
    }
    let good = r#"{"action": "call", "tool": "get_ticket", "arguments": {"ticket_id": "T-601"}}"#;
    for cut in 0..good.len() {
        assert!(parse_proposal(&good[..cut]).is_err(), "truncated at {cut}");
    }
    assert_eq!(
        parse_proposal(r#"{"action": "call", "tool": "get_ticket", "arguments": {}, "sender": "planner"}"#),
        Err(ProposalError::InvalidProposal)
    );
}

#[test]
fn scenario_rows_name_file_line_and_field() {
    assert!(parse_single_row(GOOD_ROW, "f.jsonl", 1).is_ok());
    let cases = [
        (GOOD_ROW.replace("\"emails\": 0}", "\"emails\": 0, \"extra\": 1}"), "expect.extra"),
        (GOOD_ROW.replace("\"user\": \"kwame\", ", ""), "(row)"),
        (GOOD_ROW.replace("\"sensible\"", "\"genius\""), "model"),
        (GOOD_ROW.replace("\"reason\": \"done\"", "\"reason\": \"because\""), "expect.reason"),
        (GOOD_ROW.replace("\"status\": \"done\"", "\"status\": \"finished\""), "expect.status"),
        (GOOD_ROW.replace("\"emails\": 0", "\"emails\": -1"), "expect.emails"),
        (GOOD_ROW.replace("\"expect\"", "\"limits\": {\"max_steps\": \"ten\"}, \"expect\""), "limits.max_steps"),
        (GOOD_ROW.replace("\"expect\"", "\"slow_seconds\": -1, \"expect\""), "slow_seconds"),
        (GOOD_ROW.replace("\"x1\"", "\"x 1\""), "id"),
    ];
    for (row, field) in cases {
        match parse_single_row(&row, "f.jsonl", 7) {
            Err(ScenarioError::Row { file, line, field: f, .. }) => {
                assert_eq!((file.as_str(), line, f.as_str()), ("f.jsonl", 7, field), "{row}");
            }
            other => panic!("{row}: {other:?}"),
        }
    }
    for text in junk() {
        assert!(matches!(parse_single_row(&text, "f", 1), Err(ScenarioError::Row { .. })));
    }
    let twice = format!("{GOOD_ROW}\n\n# comment\n{GOOD_ROW}\n");
    let e = parse_single_table(&twice, "t.jsonl").unwrap_err();
    assert_eq!(e.to_string(), "t.jsonl:4: field `id`: x1 is used twice");
}

#[test]
fn tool_arguments_states_worlds_policies_and_prices_refuse_junk() {
    for text in junk() {
        let v = serde_json::from_str::<serde_json::Value>(&text).unwrap_or(json!(text));
        for tool in ["get_ticket", "lookup_document", "calculator", "send_email_draft", "nope"] {
            assert!(Registry.validate(tool, &v).is_err(), "{tool}");
        }
        assert!(serde_json::from_str::<AgentState>(&text).is_err());
        assert!(WorldData::from_json(&text).is_err());
        assert!(Policy::from_json(&text).is_err());
        assert!(PriceTable::from_json(&text).is_err());
    }
    assert!(Policy::from_json(r#"{"tasks": {}, "access": {}, "owner": "me"}"#).is_err());
}
