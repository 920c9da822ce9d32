//! The m01–m15 table: every row matches the seed's outcome, and no row sends an e-mail.

use rolegate::eval::{bundled_multi, run_multi};
use rolegate::multi::MultiEnv;

use crate::util::env;

#[tokio::test]
async fn all_fifteen_rows_match_their_expectation() {
    let menv = MultiEnv::new(&env()).unwrap();
    let rows = bundled_multi().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, (1..=15).map(|i| format!("m{i:02}")).collect::<Vec<_>>());
    for row in &rows {
        let (run, out) = run_multi(row, &menv).await.unwrap();
        println!("{}", out.table_line());
        assert!(out.matches, "{}: {:?}\n{:#?}", row.id, out.mismatches, run.traces);
        assert_eq!(run.emails, 0);
    }
}

#[test]
fn a_malformed_row_names_file_line_and_field() {
    use rolegate::eval::{parse_any_table, parse_multi_table};
    let good = r#"{"id": "x1", "design": "multi", "user": "kwame", "goal": "Status of T-601?", "expect": {"reason": "done", "messages": 3, "rejected": [], "denied": [], "emails": 0}}"#;
    let cases = [
        (good.replace(r#""user""#, r#""colour": "red", "user""#), "colour"),
        (good.replace(r#""user": "kwame", "#, ""), "(row)"),
        (
            good.replace(r#""design": "multi""#, r#""design": "multi", "roles": {"reviewer": "lenient"}"#),
            "roles.reviewer",
        ),
        (
            good.replace(r#""design": "multi""#, r#""design": "multi", "roles": {"auditor": "sensible"}"#),
            "roles.auditor",
        ),
        (good.replace(r#""reason": "done""#, r#""reason": "finished""#), "expect.reason"),
        (good.replace(r#""rejected": []"#, r#""rejected": ["rude"]"#), "expect.rejected[0]"),
        (good.replace(r#""denied": []"#, r#""denied": ["send_email_draft"]"#), "expect.denied[0]"),
        (good.replace(r#""messages": 3"#, r#""messages": -1"#), "expect.messages"),
        (
            good.replace(r#""design": "multi""#, r#""design": "multi", "limits": {"max_seconds": -2}"#),
            "limits.max_seconds",
        ),
        (good.replace(r#""design": "multi""#, r#""design": "multi", "claims": "loose""#), "claims"),
        (good.replace(r#""goal": "Status of T-601?""#, r#""goal": """#), "goal"),
        (good.replace(r#""design": "multi""#, r#""design": "triple""#), "design"),
    ];
    for (line, field) in cases {
        let text = format!("# a comment\n\n{line}\n");
        let err = parse_any_table(&text, "rows.jsonl").unwrap_err().to_string();
        assert!(err.starts_with(&format!("rows.jsonl:3: field `{field}`")), "{field}: {err}");
    }
    let twice = format!("{good}\n{good}\n");
    assert!(parse_multi_table(&twice, "t").unwrap_err().to_string().starts_with("t:2: field `id`"));
    let single = r#"{"id": "s1", "model": "sensible", "user": "kwame", "task": "triage", "goal": "Check T-601.", "expect": {"status": "done", "reason": "done", "calls": ["get_ticket"], "emails": 0}}"#;
    let mixed = parse_any_table(&format!("{single}\n{good}\n"), "t").unwrap();
    assert_eq!(mixed.iter().map(|r| r.id()).collect::<Vec<_>>(), ["s1", "x1"]);
    assert!(matches!(mixed[1], rolegate::eval::AnyRow::Multi(_)));
    let err = parse_multi_table(single, "t").unwrap_err().to_string();
    assert!(err.starts_with("t:1: field `design`"), "{err}");
}
