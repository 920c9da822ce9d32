//! Approver identity across separate processes: decisions are signed with the approver's
//! own Ed25519 key, so the requester (who holds the store key, as every `run` does)
//! cannot approve under any name without the approver's key file; a forged decision row,
//! a swapped public key, a decision replayed for another request and an old decision
//! after the arguments changed are each refused with a named code; one approval sends
//! exactly one e-mail.

use rolegate::gate::PendingAction;
use rolegate::human::{ApprovalRequest, ApproverKey, DecisionStatement, RequestStatus, SigningKey};
use rolegate::store::{PENDING_DOMAIN, REQUEST_DOMAIN};
use std::path::Path;
use std::process::Output;

use crate::util::{REPLY_GOAL, register_lena, temp_dir};
use crate::util::{stderr, stdout};

const KEY: &str = "identity test signing key, held by requesters too";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    crate::util::run_binary(store, KEY, args)
}

/// A store with `n` runs parked by kwame (req-1…) and lena registered (`lena.key`).
fn store_with(name: &str, n: usize) -> std::path::PathBuf {
    let store = temp_dir(name).join("rolegate.db");
    for _ in 0..n {
        let out = rolegate(&store, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    register_lena(&store, KEY);
    store
}

fn sent(store: &Path) -> Vec<String> {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array().unwrap().iter().map(|e| e["to"].as_str().unwrap().to_string()).collect()
}

/// Asserts a refusal (exit `code`) that names `named`, and that nothing was sent since.
fn refused(out: &Output, code: i32, named: &str) {
    assert_eq!(out.status.code(), Some(code), "{}{}", stdout(out), stderr(out));
    assert!(stderr(out).contains(named) && stderr(out).contains("nothing ran"), "{}", stderr(out));
}

/// The store key, which the requester holds (every `run` needs it).
fn store_key() -> SigningKey {
    SigningKey::new(KEY.as_bytes()).unwrap()
}

fn request(conn: &rusqlite::Connection, id: &str) -> ApprovalRequest {
    let json: String = conn.query_row("SELECT json FROM requests WHERE id = ?1", [id], |r| r.get(0)).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// The requester rewrites a request row as approved by lena and signs it with the store
/// key: a row the store key alone would accept.
fn forge_approved(conn: &rusqlite::Connection, mut req: ApprovalRequest) {
    req.status = RequestStatus::Approved;
    req.decided_by = Some("lena".into());
    req.decided_at = Some(req.created_at + 1.0);
    let json = serde_json::to_string(&req).unwrap();
    let sig = store_key().sign_as(REQUEST_DOMAIN, &json);
    conn.execute("UPDATE requests SET json = ?1, sig = ?2, status = 'approved' WHERE id = ?3", (&json, &sig, &req.id))
        .unwrap();
}

fn put_decision(conn: &rusqlite::Connection, id: &str, json: &str) {
    conn.execute("INSERT OR REPLACE INTO decisions (request_id, json) VALUES (?1, ?2)", (id, json)).unwrap();
}

#[test]
fn the_requester_cannot_approve_their_own_request_under_any_name_without_the_approvers_key() {
    let store = store_with("identity-requester", 1);
    // a name alone
    refused(&rolegate(&store, &["approvals", "approve", "req-1", "--as", "lena"]), 2, "no_key");
    // a key of kwame's own making that claims to be lena's
    ApproverKey::from_seed("lena", [7; 32]).write_new(&store.with_file_name("forged.key")).unwrap();
    refused(&rolegate(&store, &["approvals", "approve", "req-1", "--key", "forged.key"]), 1, "unknown_key");
    refused(
        &rolegate(&store, &["approvals", "approve", "req-1", "--key", "forged.key", "--as", "lena"]),
        1,
        "unknown_key",
    );
    // registering lena again with a key of his own
    let again = rolegate(&store, &["approvers", "add", "lena", "--key-out", "mine.key"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("already_registered"), "{}", stderr(&again));
    // his own approver key: he is still kwame
    assert_eq!(rolegate(&store, &["approvers", "add", "kwame", "--key-out", "kwame.key"]).status.code(), Some(0));
    let own = rolegate(&store, &["approvals", "approve", "req-1", "--key", "kwame.key", "--as", "kwame"]);
    assert_eq!(own.status.code(), Some(1));
    assert!(stdout(&own).contains("self_approval"), "{}", stdout(&own));
    refused(
        &rolegate(&store, &["approvals", "approve", "req-1", "--key", "kwame.key", "--as", "lena"]),
        2,
        "name_mismatch",
    );
    // lena's key file readable by others is refused before it is used
    let open = store.with_file_name("open.key");
    std::fs::copy(store.with_file_name("lena.key"), &open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let wide = rolegate(&store, &["approvals", "approve", "req-1", "--key", "open.key"]);
    refused(&wide, 2, "bad_key_file");
    assert!(stderr(&wide).contains("wider than 0600"), "{}", stderr(&wide));
    assert!(sent(&store).is_empty(), "nothing was sent");
    // lena, with her key: exactly one e-mail, then never again
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("req-1 approve by lena: ok"), "{}", stdout(&ok));
    let again = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(sent(&store), ["kwame@example.com"]);
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(0), "the recorded decision verifies: {}", stdout(&check));
}

#[test]
fn a_forged_decision_row_or_none_at_all_is_refused() {
    let store = store_with("identity-forged", 2);
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        // req-1: marked approved, no decision behind it
        forge_approved(&conn, request(&conn, "req-1"));
        // req-2: marked approved, with a decision signed by a key that is not lena's
        let req = request(&conn, "req-2");
        let mallet = ApproverKey::from_seed("lena", [9; 32]);
        let signed = mallet.sign(&DecisionStatement::new(&req, "approve", req.created_at + 1.0, &mallet)).unwrap();
        put_decision(&conn, "req-2", &serde_json::to_string(&signed).unwrap());
        forge_approved(&conn, req);
    }
    // lena's own approval of either would carry the forgery out: refused instead
    refused(&rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]), 1, "no_decision");
    refused(&rolegate(&store, &["approvals", "approve", "req-2", "--key", "lena.key"]), 1, "bad_decision_signature");
    assert!(sent(&store).is_empty(), "no forged approval sent anything");
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(stdout(&check).contains("decisions req-2: refused: bad_signature"), "{}", stdout(&check));
}

#[test]
fn a_public_key_swapped_in_the_registry_is_refused() {
    let store = store_with("identity-swapped", 1);
    let mallet = ApproverKey::from_seed("lena", [11; 32]);
    mallet.write_new(&store.with_file_name("mallet.key")).unwrap();
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        let json: String = conn.query_row("SELECT json FROM approvers WHERE name = 'lena'", [], |r| r.get(0)).unwrap();
        let mut row: serde_json::Value = serde_json::from_str(&json).unwrap();
        row["public_key"] = mallet.public_hex().into();
        row["fingerprint"] = mallet.fingerprint().into();
        conn.execute("UPDATE approvers SET json = ?1 WHERE name = 'lena'", [row.to_string()]).unwrap();
    }
    refused(&rolegate(&store, &["approvals", "approve", "req-1", "--key", "mallet.key"]), 1, "approver_row_refused");
    assert!(sent(&store).is_empty());
    let listed = stdout(&rolegate(&store, &["approvers", "list"]));
    assert!(listed.contains("lena") && listed.contains("refused: bad_signature"), "{listed}");
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(stdout(&check).contains("approvers lena: refused: bad_signature"), "{}", stdout(&check));
}

#[test]
fn a_decision_replayed_for_another_request_is_refused() {
    let store = store_with("identity-replayed", 2);
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        let genuine: String =
            conn.query_row("SELECT json FROM decisions WHERE request_id = 'req-1'", [], |r| r.get(0)).unwrap();
        put_decision(&conn, "req-2", &genuine);
        forge_approved(&conn, request(&conn, "req-2"));
    }
    refused(&rolegate(&store, &["approvals", "approve", "req-2", "--key", "lena.key"]), 1, "decision_mismatch");
    assert_eq!(sent(&store), ["kwame@example.com"], "only req-1's e-mail");
}

#[test]
fn an_old_decision_after_the_arguments_changed_is_refused() {
    let store = store_with("identity-changed", 1);
    let lena = ApproverKey::read(&store.with_file_name("lena.key")).unwrap();
    {
        let conn = rusqlite::Connection::open(&store).unwrap();
        let mut req = request(&conn, "req-1");
        // lena's genuine decision on req-1 as it stood
        let genuine = lena.sign(&DecisionStatement::new(&req, "approve", req.created_at + 1.0, &lena)).unwrap();
        put_decision(&conn, "req-1", &serde_json::to_string(&genuine).unwrap());
        // then the parked call is redirected, and the request re-signed to match it
        let json: String = conn.query_row("SELECT json FROM pending WHERE run_id = 'run-1'", [], |r| r.get(0)).unwrap();
        let mut action: PendingAction = serde_json::from_str(&json).unwrap();
        action.call.arguments["to"] = "evil@attacker.example".into();
        let json = serde_json::to_string(&action).unwrap();
        let sig = store_key().sign_as(PENDING_DOMAIN, &json);
        conn.execute("UPDATE pending SET json = ?1, sig = ?2 WHERE run_id = 'run-1'", (&json, &sig)).unwrap();
        req.fingerprint = action.call.fingerprint();
        req.preview = rolegate::human::preview(&action.call);
        forge_approved(&conn, req);
    }
    refused(&rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]), 1, "changed_since_review");
    assert!(sent(&store).is_empty(), "the redirected e-mail did not leave");
}
