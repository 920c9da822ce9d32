//! Keys and clocks: a key is read the same way from the environment and from a file
//! (UTF-8, trimmed, not empty, at least 32 bytes), a key file must be a small regular
//! file, a store says when it was signed with a different key, a request's time window
//! is judged on the approver's clock, and the open-request cap is per requester.

use rolegate::human::{ApprovalError, CheckpointError, DecisionCode, MAX_LIFETIME, RequestStatus, SigningKey};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::util::{REPLY_GOAL, parked, parked_with, temp_dir};

const LONG: &str = "a key of thirty-two bytes or more, for tests";

fn bad_key(r: Result<SigningKey, CheckpointError>) -> String {
    match r {
        Err(CheckpointError::BadKey(why)) => why,
        other => panic!("expected a refused key, got {other:?}"),
    }
}

#[test]
fn unusable_keys_are_refused_with_the_reason() {
    let env = |bytes: &[u8]| SigningKey::from_config(Some(OsStr::from_bytes(bytes)), None);
    assert!(bad_key(env(b"\xff\xfe not utf-8 but long enough to pass the length")).contains("not UTF-8"));
    assert!(bad_key(env(b"")).contains("empty or only whitespace"));
    assert!(bad_key(env(&[b' '; 40])).contains("empty or only whitespace"));
    assert!(bad_key(env(b"sixteen bytes ok")).contains("16 bytes; it must be at least 32"));
    // 31 bytes of key inside whitespace is short: padding does not count
    assert!(bad_key(env(format!("   {}   ", &LONG[..31]).as_bytes())).contains("31 bytes"));
}

#[test]
fn the_environment_and_a_file_give_the_same_key_for_the_same_text() {
    let dir = temp_dir("keys-same");
    let path = dir.join("key");
    std::fs::write(&path, format!("  {LONG}\n")).unwrap();
    let from_file = SigningKey::from_config(None, Some(&path)).unwrap();
    let from_env = SigningKey::from_config(Some(OsStr::new(&format!("{LONG}\n"))), None).unwrap();
    assert_eq!(from_file.key_id(), from_env.key_id(), "both trimmed the same way");
    assert_eq!(from_env.key_id(), SigningKey::new(LONG.as_bytes()).unwrap().key_id());
    assert_ne!(from_env.key_id(), SigningKey::new(format!("{LONG}!").as_bytes()).unwrap().key_id());
}

#[test]
fn a_key_file_must_be_a_small_regular_file() {
    let dir = temp_dir("keys-files");
    assert!(bad_key(SigningKey::from_file(Path::new("/dev/zero"))).contains("not a regular file"));
    assert!(bad_key(SigningKey::from_file(&dir)).contains("not a regular file"));
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // a FIFO nobody writes to would block a reader forever; it is refused before opening
    assert!(bad_key(SigningKey::from_file(&fifo)).contains("not a regular file"));
    let big = dir.join("big");
    std::fs::write(&big, "k".repeat(5000)).unwrap();
    assert!(bad_key(SigningKey::from_file(&big)).contains("at most 4096"));
    assert!(bad_key(SigningKey::from_file(&dir.join("missing"))).contains("missing"));
}

fn rolegate(store: &Path, key: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .current_dir(store.parent().unwrap())
        .args(args)
        .arg("--store")
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", key)
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .env_remove("ROLEGATE_TEST_CRASH_AT")
        .output()
        .unwrap()
}

#[test]
fn a_store_used_with_a_different_key_says_so_and_changes_nothing() {
    let store = temp_dir("keys-other").join("rolegate.db");
    let first = "the key this store was started with, long enough";
    let parked = rolegate(&store, first, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
    assert_eq!(parked.status.code(), Some(0), "{}", String::from_utf8_lossy(&parked.stderr));
    crate::util::register_lena(&store, first);
    let before = std::fs::read(&store).unwrap();
    let other = "a new shell's key, also long enough to be used";
    for args in [
        &["approvals", "list"][..],
        &["approvals", "approve", "req-1", "--key", "lena.key"],
        &["outbox"],
        &["store", "check"],
        &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL],
    ] {
        let out = rolegate(&store, other, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("signed with a different key") && !err.contains("edited"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&store).unwrap(), before, "nothing was written with the other key");
    let ok = rolegate(&store, first, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[tokio::test]
async fn a_request_from_a_clock_far_ahead_or_open_too_long_is_refused_on_the_approvers_clock() {
    let year = 365.0 * 24.0 * 3600.0;
    let mut p = parked().await;
    let id = p.request.id.clone();
    if let Some(r) = p.queue.requests.get_mut(&id) {
        r.created_at += year;
        r.expires_at += year;
    }
    let d = p.queue.approve(&id, "lena", p.lab.agent.gate_mut());
    assert_eq!((d.code, d.outcome.is_none()), (DecisionCode::BadExpiry, true));
    assert!(p.lab.world.outbox.is_empty());

    let mut p = parked().await;
    if let Some(r) = p.queue.requests.get_mut(&id) {
        r.expires_at = r.created_at + 2.0 * 24.0 * 3600.0;
    }
    assert_eq!(p.queue.approve(&id, "lena", p.lab.agent.gate_mut()).code, DecisionCode::BadExpiry);
    assert_eq!(p.queue.requests[&id].status, RequestStatus::Pending);

    // a queue configured with a longer lifetime still files requests of at most a day
    let p = parked_with(&["lena"], Duration::from_secs(30 * 24 * 3600)).await;
    assert_eq!(p.request.expires_at - p.request.created_at, MAX_LIFETIME.as_secs_f64());
}

#[tokio::test]
async fn the_open_request_cap_is_per_requester() {
    let mut p = parked().await;
    p.queue.max_open = 1;
    let mut again = p.lab.agent.gate().pending()["pa-1"].clone();
    again.id = "pa-2".into();
    assert_eq!(p.queue.submit(&again), Err(ApprovalError::QueueFull { open: 1, cap: 1 }), "kwame's share is full");
    let mut other = again.clone();
    other.id = "pa-3".into();
    other.caller = "lena".into();
    assert_eq!(p.queue.submit(&other).map(|r| r.requested_by), Ok("lena".to_string()), "lena still parks");
}
