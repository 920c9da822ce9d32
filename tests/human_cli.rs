//! The built binary as separate processes on one store file: park, approve, approve
//! again; deny, cancel and self-approval; a missing key; a damaged store.

use rolegate::cost::ManualClock;
use rolegate::store::{Desk, Store};
use std::path::Path;
use std::process::{Command, Output};

use crate::util::stdout;
use crate::util::{env, temp_dir};

const KEY: &str = "cli-test signing key, not a real secret";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    if args.contains(&"lena.key") {
        crate::util::register_lena(store, KEY);
    }
    crate::util::run_binary(store, KEY, args)
}

fn park(store: &Path) -> Output {
    rolegate(store, &["run", "--task", "reply", "--user", "kwame", "Reply to T-601 about returns."])
}

#[test]
fn park_approve_and_approve_again_as_separate_processes_send_exactly_one_email() {
    let store = temp_dir("cli-flow").join("rolegate.db");
    let parked = park(&store);
    assert_eq!(parked.status.code(), Some(0), "{}", String::from_utf8_lossy(&parked.stderr));
    let text = stdout(&parked);
    assert!(text.contains("run-1 awaiting_approval needs_approval"), "{text}");
    assert!(
        text.contains(r#"req-1   pending   send_email_draft  kwame"#)
            && text.contains(
                r#"send_email_draft {"body": "Draft based on o2", "subject": "Your return", "to": "kwame@example.com"}"#
            ),
        "the request shows the exact action: {text}"
    );

    let listed = rolegate(&store, &["approvals", "list", "--format", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let first = &list.as_array().unwrap()[0];
    for field in ["id", "tool", "preview", "requested_by", "expires_at", "status"] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    assert_eq!((first["id"].as_str(), first["status"].as_str()), (Some("req-1"), Some("pending")));

    let approved = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(approved.status.code(), Some(0), "{}", String::from_utf8_lossy(&approved.stderr));
    assert!(stdout(&approved).contains("req-1 approve by lena: ok"), "{}", stdout(&approved));
    assert!(stdout(&approved).contains("run-1 done done sources=o1,o2,o3 emails_sent=1"), "{}", stdout(&approved));

    let again = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stdout(&again).contains("not_pending") && stdout(&again).contains("emails_sent=0"), "{}", stdout(&again));

    let outbox = rolegate(&store, &["outbox", "--format", "json"]);
    let sent: serde_json::Value = serde_json::from_slice(&outbox.stdout).unwrap();
    assert_eq!(sent.as_array().unwrap().len(), 1, "exactly one e-mail: {sent}");
    assert_eq!(sent[0]["to"], "kwame@example.com");
    // read the store directly too, through the library, with the same key
    let d = Desk::new(
        Store::open(&store).unwrap(),
        rolegate::human::SigningKey::new(KEY.as_bytes()).unwrap(),
        env(),
        ManualClock::new().shared(),
    );
    assert_eq!(d.outbox().unwrap().len(), 1);
    assert_eq!(d.latest("run-1").unwrap().state.status().name(), "done");
    let json = serde_json::to_string(&d.audit().unwrap()).unwrap();
    assert!(!json.contains("kwame@example.com"), "the audit holds no arguments");
}

#[test]
fn deny_cancel_and_self_approval_from_the_command_line() {
    let store = temp_dir("cli-decisions").join("rolegate.db");
    for _ in 0..3 {
        assert_eq!(park(&store).status.code(), Some(0));
    }
    // a name alone decides nothing; kwame's own approver key is still kwame
    let named = rolegate(&store, &["approvals", "approve", "req-1", "--as", "kwame"]);
    assert_eq!(named.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&named.stderr).contains("no_key"), "{}", String::from_utf8_lossy(&named.stderr));
    let added = rolegate(&store, &["approvers", "add", "kwame", "--key-out", "kwame.key"]);
    assert_eq!(added.status.code(), Some(0), "{}", String::from_utf8_lossy(&added.stderr));
    let own = rolegate(&store, &["approvals", "approve", "req-1", "--key", "kwame.key"]);
    assert_eq!(own.status.code(), Some(1));
    assert!(stdout(&own).contains("self_approval"), "{}", stdout(&own));
    let denied = rolegate(&store, &["approvals", "deny", "req-1", "--key", "lena.key"]);
    assert!(stdout(&denied).contains("run-1 stopped denied"), "{}", stdout(&denied));
    // an approver's name without the key withdraws nothing; the requester may, by name
    let posed = rolegate(&store, &["approvals", "cancel", "req-2", "--as", "lena"]);
    assert_eq!(posed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&posed.stderr).contains("no_key"), "{}", String::from_utf8_lossy(&posed.stderr));
    let cancelled = rolegate(&store, &["approvals", "cancel", "req-2", "--as", "kwame"]);
    assert!(stdout(&cancelled).contains("run-2 stopped cancelled"), "{}", stdout(&cancelled));
    let outsider = rolegate(&store, &["approvers", "add", "mallory", "--key-out", "mallory.key"]);
    assert_eq!(outsider.status.code(), Some(1));
    let err = String::from_utf8_lossy(&outsider.stderr);
    assert!(err.contains("not_an_approver") && !store.with_file_name("mallory.key").exists(), "{err}");
    let table = stdout(&rolegate(&store, &["approvals", "list"]));
    let statuses: Vec<&str> = table.lines().map(|l| l.split_whitespace().nth(1).unwrap_or("")).collect();
    assert_eq!(statuses, ["denied", "cancelled", "pending"], "{table}");
    assert_eq!(stdout(&rolegate(&store, &["outbox"])), "", "nothing was sent");
}

#[test]
fn a_missing_key_or_a_damaged_store_is_a_clear_error() {
    let dir = temp_dir("cli-errors");
    let store = dir.join("rolegate.db");
    let no_key = Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .args(["approvals", "list", "--store"])
        .arg(&store)
        .env_remove("ROLEGATE_SIGNING_KEY")
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .output()
        .unwrap();
    assert_eq!(no_key.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_key.stderr).contains("ROLEGATE_SIGNING_KEY"));
    assert!(!store.exists(), "nothing was created without a key");

    assert_eq!(park(&store).status.code(), Some(0));
    let bytes = std::fs::read(&store).unwrap();
    std::fs::write(&store, &bytes[..bytes.len() / 2]).unwrap();
    let listed = rolegate(&store, &["approvals", "list"]);
    assert_eq!(listed.status.code(), Some(2));
    let err = String::from_utf8_lossy(&listed.stderr);
    assert!(err.contains("SQLite reports the file damaged") && err.contains("left untouched"), "{err}");
}
