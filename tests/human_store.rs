//! The durable store and the approval desk: each `Desk` below is opened afresh on the
//! same file, the way a new process would; a damaged or edited file is refused clearly
//! and costs no other run.

use rolegate::cost::ManualClock;
use rolegate::human::{CheckpointCode, DecisionCode, RequestStatus};
use rolegate::store::{Desk, DeskAction, DeskError, RunSpec, Store, StoreError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::util::{REPLY_GOAL, env, key, temp_dir};

fn desk(path: &Path, clock: &ManualClock) -> Result<Desk, StoreError> {
    Ok(Desk::new(Store::open(path)?, key(), env(), clock.shared()))
}

fn reply() -> RunSpec {
    RunSpec::new("auto", "kwame", "reply", &[])
}

async fn two_parked_runs(name: &str, clock: &ManualClock) -> PathBuf {
    let path = temp_dir(name).join("rolegate.db");
    let mut d = desk(&path, clock).unwrap();
    for goal in [REPLY_GOAL, "Reply to T-601 about returns, please."] {
        let started = d.start(&reply(), goal).await.unwrap();
        assert_eq!(started.run.state.status().name(), "awaiting_approval");
    }
    path
}

#[tokio::test]
async fn park_approve_and_approve_again_in_new_processes_send_exactly_one_email() {
    let clock = ManualClock::new();
    let path = temp_dir("store-flow").join("rolegate.db");
    let started = desk(&path, &clock).unwrap().start(&reply(), REPLY_GOAL).await.unwrap();
    let req = started.request.unwrap();
    assert_eq!((req.id.as_str(), req.run_id.as_str(), req.status), ("req-1", "run-1", RequestStatus::Pending));
    assert!(desk(&path, &clock).unwrap().outbox().unwrap().is_empty(), "parking sends nothing");
    clock.advance(Duration::from_secs(30));
    let first = desk(&path, &clock).unwrap().decide("req-1", "lena", DeskAction::Approve).await.unwrap();
    assert_eq!((first.code, first.sent_now), (DecisionCode::Ok, 1));
    let run = first.run.unwrap();
    assert_eq!(
        (run.state.status().name(), run.state.sources()),
        ("done", &["o1".to_string(), "o2".into(), "o3".into()][..])
    );
    let again = desk(&path, &clock).unwrap().decide("req-1", "lena", DeskAction::Approve).await.unwrap();
    assert_eq!((again.code, again.sent_now), (DecisionCode::NotPending, 0));
    let d = desk(&path, &clock).unwrap();
    let sent = d.outbox().unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].id.as_str(), sent[0].to.as_str()), ("e1", "kwame@example.com"));
    assert_eq!(d.latest("run-1").unwrap().state.status().name(), "done");
    let audit: Vec<String> = d.audit().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(audit, ["0.0 kwame submit pending", "30.0 lena approve ok", "30.0 lena approve not_pending"]);
}

#[tokio::test]
async fn deny_cancel_self_approval_and_expiry_across_processes() {
    let clock = ManualClock::new();
    let path = temp_dir("store-decisions").join("rolegate.db");
    for _ in 0..4 {
        desk(&path, &clock).unwrap().start(&reply(), REPLY_GOAL).await.unwrap();
    }
    let cases = [
        ("req-1", "kwame", DeskAction::Approve, DecisionCode::SelfApproval, "awaiting_approval", "needs_approval"),
        ("req-1", "lena", DeskAction::Deny, DecisionCode::Ok, "stopped", "denied"),
        ("req-2", "kwame", DeskAction::Cancel, DecisionCode::Ok, "stopped", "cancelled"),
        ("req-3", "mallory", DeskAction::Approve, DecisionCode::NotAnApprover, "awaiting_approval", "needs_approval"),
        ("req-9", "lena", DeskAction::Approve, DecisionCode::UnknownRequest, "", ""),
    ];
    for (req, who, action, code, status, reason) in cases {
        let d = desk(&path, &clock).unwrap().decide(req, who, action).await.unwrap();
        assert_eq!(d.code, code, "{req} {who}");
        let got = d.run.map(|r| (r.state.status().name(), r.reason().as_str()));
        assert_eq!(got.unwrap_or(("", "")), (status, reason), "{req} {who}");
    }
    clock.advance(Duration::from_secs(901));
    let mut d = desk(&path, &clock).unwrap();
    let statuses: Vec<_> = d.requests().unwrap().iter().map(|r| (r.id.clone(), r.status)).collect();
    assert_eq!(
        statuses,
        [
            ("req-1".into(), RequestStatus::Denied),
            ("req-2".into(), RequestStatus::Cancelled),
            ("req-3".into(), RequestStatus::Expired),
            ("req-4".into(), RequestStatus::Expired),
        ]
    );
    let late = d.decide("req-4", "lena", DeskAction::Approve).await.unwrap();
    assert_eq!(
        (late.code, late.run.unwrap().reason().as_str()),
        (DecisionCode::NotPending, "denied"),
        "expiry means no"
    );
    assert!(d.outbox().unwrap().is_empty());
    assert_eq!(d.latest("run-2").unwrap().state.reason().unwrap().as_str(), "cancelled");
}

#[tokio::test]
async fn a_tampered_stored_checkpoint_is_refused_and_the_other_run_still_works() {
    let clock = ManualClock::new();
    let path = two_parked_runs("store-tamper", &clock).await;
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let sealed: String = conn
            .query_row("SELECT sealed FROM checkpoints WHERE run_id = 'run-2' ORDER BY seq DESC LIMIT 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        let edited = sealed
            .replace(r#"\"awaiting_approval\""#, r#"\"running\""#)
            .replace(r#"\"pending_id\":\"pa-1\""#, r#"\"pending_id\":\"\""#);
        assert_ne!(edited, sealed);
        conn.execute("UPDATE checkpoints SET sealed = ?1 WHERE run_id = 'run-2'", [&edited]).unwrap();
    }
    let refused = desk(&path, &clock).unwrap().decide("req-2", "lena", DeskAction::Approve).await.unwrap_err();
    assert!(
        matches!(&refused, DeskError::Checkpoint { run_id, source } if run_id == "run-2" && source.code() == Some(CheckpointCode::BadSignature)),
        "{refused}"
    );
    let mut d = desk(&path, &clock).unwrap();
    assert!(d.outbox().unwrap().is_empty(), "nothing ran for the tampered run");
    assert_eq!(d.requests().unwrap()[1].status, RequestStatus::Pending, "the refusal wrote nothing");
    let ok = d.decide("req-1", "lena", DeskAction::Approve).await.unwrap();
    assert_eq!((ok.code, ok.sent_now), (DecisionCode::Ok, 1));
}

#[tokio::test]
async fn a_store_cut_short_or_edited_gives_a_clear_error_and_loses_no_other_run() {
    let clock = ManualClock::new();
    let path = two_parked_runs("store-damage", &clock).await;
    let bytes = std::fs::read(&path).unwrap();

    // cut short: refused before anything is written, and left exactly as it was
    let short = path.with_file_name("short.db");
    std::fs::write(&short, &bytes[..bytes.len() / 2]).unwrap();
    let e = desk(&short, &clock).unwrap_err();
    assert!(matches!(e, StoreError::Damaged { .. }), "{e}");
    assert!(e.to_string().contains("SQLite reports the file damaged") && e.to_string().contains("short.db"), "{e}");
    assert_eq!(std::fs::read(&short).unwrap(), &bytes[..bytes.len() / 2], "the damaged file is untouched");
    let tiny = path.with_file_name("tiny.db");
    std::fs::write(&tiny, &bytes[..10]).unwrap();
    let e = desk(&tiny, &clock).unwrap_err();
    assert!(matches!(e, StoreError::Damaged { .. } | StoreError::NotAStore { .. }), "{e}");
    assert_eq!(std::fs::read(&tiny).unwrap(), &bytes[..10], "the cut file is untouched");

    // edited by hand, byte by byte: run-2's checkpoints no longer verify; run-1 is intact
    let edited_path = path.with_file_name("edited.db");
    let needle = b"please";
    let mut edited = bytes.clone();
    let mut hits = 0;
    for i in 0..edited.len().saturating_sub(needle.len()) {
        if &edited[i..i + needle.len()] == needle {
            edited[i..i + needle.len()].copy_from_slice(b"PLEASE");
            hits += 1;
        }
    }
    assert!(hits > 0);
    std::fs::write(&edited_path, &edited).unwrap();
    let e = desk(&edited_path, &clock).unwrap().decide("req-2", "lena", DeskAction::Approve).await.unwrap_err();
    assert!(e.to_string().contains("bad_signature"), "{e}");
    let ok = desk(&edited_path, &clock).unwrap().decide("req-1", "lena", DeskAction::Approve).await.unwrap();
    assert_eq!((ok.code, ok.sent_now), (DecisionCode::Ok, 1), "the other run is not lost");

    // not a store at all
    let text = path.with_file_name("notes.txt");
    std::fs::write(&text, "just some notes, not a database").unwrap();
    assert!(matches!(desk(&text, &clock).unwrap_err(), StoreError::NotAStore { .. }));
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "just some notes, not a database");
    // another SQLite database
    let other = path.with_file_name("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x INTEGER);").unwrap();
    assert!(matches!(desk(&other, &clock).unwrap_err(), StoreError::NotAStore { .. }));
}

#[tokio::test]
async fn an_approval_forged_in_the_file_is_refused_and_nothing_is_sent() {
    let clock = ManualClock::new();
    let path = two_parked_runs("store-forge", &clock).await;
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let json: String = conn.query_row("SELECT json FROM requests WHERE id = 'req-1'", [], |r| r.get(0)).unwrap();
        let forged = json
            .replace(r#""status":"pending""#, r#""status":"approved""#)
            .replace(r#""decided_by":null"#, r#""decided_by":"lena""#);
        assert_ne!(forged, json);
        conn.execute("UPDATE requests SET json = ?1, status = 'approved' WHERE id = 'req-1'", [&forged]).unwrap();
        // and a parked call redirected after review
        let pending: String =
            conn.query_row("SELECT json FROM pending WHERE run_id = 'run-2'", [], |r| r.get(0)).unwrap();
        let redirected = pending.replace("kwame@example.com", "records-export@example.org");
        conn.execute("UPDATE pending SET json = ?1 WHERE run_id = 'run-2'", [&redirected]).unwrap();
    }
    for req in ["req-1", "req-2"] {
        let e = desk(&path, &clock).unwrap().decide(req, "lena", DeskAction::Approve).await.unwrap_err();
        assert!(e.to_string().contains("bad_signature"), "{req}: {e}");
    }
    assert!(desk(&path, &clock).unwrap().outbox().unwrap().is_empty(), "no forged approval sent anything");
}
