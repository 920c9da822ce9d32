//! A bad row is set aside, not fatal: the built binary on a store with one tampered
//! request row, or a malformed outbox and audit row. Every other request, run and
//! command keeps working; `approvals list` shows the row as refused with its code;
//! `rolegate store check` names every such row (exit 1); nothing is deleted.

use std::path::Path;
use std::process::Output;

use crate::util::{REPLY_GOAL, temp_dir};
use crate::util::{stderr, stdout};

const KEY: &str = "store-quarantine test signing key, not a real secret";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    if args.contains(&"lena.key") {
        crate::util::register_lena(store, KEY);
    }
    crate::util::run_binary(store, KEY, args)
}

fn park(store: &Path) {
    let parked = rolegate(store, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
    assert_eq!(parked.status.code(), Some(0), "{}", stderr(&parked));
}

fn sent(store: &Path) -> usize {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().len()
}

#[test]
fn a_tampered_request_row_is_refused_by_id_and_every_other_command_still_works() {
    let store = temp_dir("quarantine-request").join("rolegate.db");
    for _ in 0..3 {
        park(&store);
    }
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        let json: String = conn.query_row("SELECT json FROM requests WHERE id = 'req-2'", [], |r| r.get(0)).unwrap();
        let edited = json.replace("kwame@example.com", "evil@attacker.example");
        assert_ne!(edited, json);
        conn.execute("UPDATE requests SET json = ?1 WHERE id = 'req-2'", [&edited]).unwrap();
    }
    let listed = rolegate(&store, &["approvals", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let table = stdout(&listed);
    assert!(table.contains("req-1   pending") && table.contains("req-3   pending"), "{table}");
    assert!(table.contains("req-2   refused: bad_signature"), "{table}");
    assert!(!table.contains("evil@attacker.example"), "the tampered contents are not shown: {table}");
    let json = rolegate(&store, &["approvals", "list", "--format", "json"]);
    let items: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let refused: Vec<_> = items.as_array().unwrap().iter().filter(|i| i["status"] == "refused").collect();
    assert_eq!(
        (refused.len(), refused[0]["id"].as_str(), refused[0]["code"].as_str()),
        (1, Some("req-2"), Some("bad_signature"))
    );

    // the tampered request decides nothing, with its code (exit 1: refused, nothing ran)
    let bad = rolegate(&store, &["approvals", "approve", "req-2", "--key", "lena.key"]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("requests req-2: refused: bad_signature") && stderr(&bad).contains("nothing ran"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(sent(&store), 0);

    // every other request, a new run and the outbox work
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("emails_sent=1"), "{}", stdout(&ok));
    let denied = rolegate(&store, &["approvals", "deny", "req-3", "--key", "lena.key"]);
    assert_eq!(denied.status.code(), Some(0), "{}", stderr(&denied));
    park(&store);
    let table = stdout(&rolegate(&store, &["approvals", "list"]));
    assert!(table.contains("req-4   pending"), "a new run files a new request beside the bad row: {table}");
    assert_eq!(sent(&store), 1, "one e-mail, to the reviewed address");

    // store check names the row; nothing was deleted
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    assert_eq!(
        stdout(&check).lines().collect::<Vec<_>>(),
        ["requests req-2: refused: bad_signature (the signature does not match: edited in the file)"]
    );
    let conn = rusqlite::Connection::open(&store).unwrap();
    let kept: i64 = conn.query_row("SELECT count(*) FROM requests WHERE id = 'req-2'", [], |r| r.get(0)).unwrap();
    assert_eq!(kept, 1, "the row is still there");
}

#[test]
fn malformed_outbox_audit_and_copied_rows_are_named_and_runs_still_park_and_approve() {
    let store = temp_dir("quarantine-unsigned").join("rolegate.db");
    park(&store);
    park(&store);
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        conn.execute(
            "INSERT INTO outbox (idempotency_key, run_id, json, sig) VALUES ('junk', 'run-9', '{not json', '')",
            [],
        )
        .unwrap();
        conn.execute("INSERT INTO approval_audit (json) VALUES ('{\"ts\": 1, \"extra\": true}')", []).unwrap();
        // req-1's signed record copied over req-2's: it verifies, but is filed under another id
        conn.execute(
            "UPDATE requests SET json = (SELECT json FROM requests WHERE id = 'req-1'), sig = (SELECT sig FROM requests WHERE id = 'req-1') WHERE id = 'req-2'",
            [],
        )
        .unwrap();
    }
    let check = rolegate(&store, &["store", "check", "--format", "json"]);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let bad: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let named: Vec<(String, String, String)> = bad
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (b["table"].as_str().unwrap().into(), b["id"].as_str().unwrap().into(), b["code"].as_str().unwrap().into())
        })
        .collect();
    assert_eq!(
        named,
        [
            ("requests".into(), "req-2".into(), "bad_schema".into()),
            ("outbox".into(), "1".into(), "bad_signature".into()),
            // an audit line added by hand carries no signature: refused for that first
            ("approval_audit".into(), "3".into(), "bad_signature".into()),
        ]
    );
    park(&store);
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let copied = rolegate(&store, &["approvals", "approve", "req-2", "--key", "lena.key"]);
    assert_eq!(copied.status.code(), Some(1), "{}", stderr(&copied));
    assert!(stderr(&copied).contains("holds the record of req-1"), "{}", stderr(&copied));
    assert_eq!(sent(&store), 1, "the junk row is not shown as mail");
}
