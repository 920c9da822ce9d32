//! The outbox belongs to the signed record: a row stands for a real send only when it is
//! signed with the store key and bound to a signed parked action of its run that ran
//! (same idempotency key, recipient, subject and body). A row inserted by hand with the
//! approved action's (predictable) idempotency key used to make the approval report `ok`
//! and send nothing; now it is set aside, reported by `store check` and never shown as
//! mail, and the approved e-mail goes out exactly once.

use rolegate::gate::PendingAction;
use rolegate::human::SigningKey;
use rolegate::store::OUTBOX_DOMAIN;
use rolegate::world::SentEmail;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::{REPLY_GOAL, register_lena, temp_dir};

const KEY: &str = "store-outbox test signing key, not a real secret";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .current_dir(store.parent().unwrap())
        .args(args)
        .arg("--store")
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", KEY)
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .env_remove("ROLEGATE_TEST_CRASH_AT")
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sent_to(store: &Path) -> Vec<String> {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array().unwrap().iter().map(|e| e["to"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_forged_outbox_row_does_not_swallow_an_approved_email() {
    let store = temp_dir("outbox-forged").join("rolegate.db");
    for _ in 0..2 {
        let out = rolegate(&store, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    register_lena(&store, KEY);
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        for (n, run) in [(1, "run-1"), (2, "run-2")] {
            let json: String =
                conn.query_row("SELECT json FROM pending WHERE run_id = ?1", [run], |r| r.get(0)).unwrap();
            let action: PendingAction = serde_json::from_str(&json).unwrap();
            let key = action.call.arguments["idempotency_key"].as_str().unwrap().to_string();
            let forged = SentEmail {
                id: format!("e{n}"),
                to: "evil@attacker.example".into(),
                subject: "Your return".into(),
                body: "Draft based on o2".into(),
                idempotency_key: key.clone(),
            };
            let json = serde_json::to_string(&forged).unwrap();
            // run-1: a row with no valid signature; run-2: signed with the store key (which
            // the requester holds) but bound to no action that ran
            let sig = if n == 1 {
                "00".to_string()
            } else {
                SigningKey::new(KEY.as_bytes()).unwrap().sign_as(OUTBOX_DOMAIN, &json)
            };
            conn.execute(
                "INSERT INTO outbox (idempotency_key, run_id, json, sig) VALUES (?1, ?2, ?3, ?4)",
                (&key, run, &json, &sig),
            )
            .unwrap();
        }
    }
    assert!(sent_to(&store).is_empty(), "a forged row is never shown as mail");
    for req in ["req-1", "req-2"] {
        let ok = rolegate(&store, &["approvals", "approve", req, "--key", "lena.key"]);
        assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
        assert!(text(&ok.stdout).contains("emails_sent=1"), "{req}: {}", text(&ok.stdout));
    }
    assert_eq!(sent_to(&store), ["kwame@example.com", "kwame@example.com"], "both approved e-mails went out");
    let again = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert!(text(&again.stdout).contains("emails_sent=0"), "{}", text(&again.stdout));
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(1));
    let lines: Vec<String> = text(&check.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("outbox 1: refused: bad_signature"), "{lines:?}");
    assert!(lines[1].starts_with("outbox 2: refused: unbound (matches no signed parked action of run-2"), "{lines:?}");
}
