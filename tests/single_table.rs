//! The s01–s14 table: every row matches, and the table reaches every reason but the two
//! that need a person or an interrupt.

use rolegate::agent::StopReason;
use rolegate::eval::{bundled_single, run_single};
use std::collections::BTreeSet;

use crate::util::env;

#[tokio::test]
async fn all_fourteen_rows_match_their_expectation() {
    let env = env();
    let rows = bundled_single().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, (1..=14).map(|i| format!("s{i:02}")).collect::<Vec<_>>());
    let mut reached = BTreeSet::new();
    for row in &rows {
        let out = run_single(row, &env).await.unwrap();
        assert!(out.matches, "{}: {:?}", row.id, out.mismatches);
        assert_eq!(out.emails, 0);
        reached.insert(out.reason);
    }
    let missing: Vec<&str> = StopReason::ALL.iter().filter(|r| !reached.contains(r)).map(|r| r.as_str()).collect();
    assert_eq!(missing, ["denied", "cancelled", "model_error"]);
}

#[tokio::test]
async fn the_same_row_gives_the_same_trace_byte_for_byte() {
    let env = env();
    for row in bundled_single().unwrap() {
        let mut a = row.lab_config().unwrap().build(&env);
        let mut b = row.lab_config().unwrap().build(&env);
        let ra = a.agent.run(&row.goal, &row.run_id()).await.unwrap();
        let rb = b.agent.run(&row.goal, &row.run_id()).await.unwrap();
        assert_eq!(ra.trace().lines().join("\n"), rb.trace().lines().join("\n"), "{}", row.id);
        assert_eq!(ra.state, rb.state, "{}", row.id);
    }
}

#[tokio::test]
async fn a_row_that_does_not_hold_is_reported_as_a_mismatch() {
    let env = env();
    let mut row = bundled_single().unwrap().remove(0);
    row.expect.calls = vec!["get_ticket".into()];
    let out = run_single(&row, &env).await.unwrap();
    assert!(!out.matches);
    assert_eq!(out.mismatches.len(), 1, "{:?}", out.mismatches);
    assert!(out.mismatches[0].starts_with("calls:"));
}
