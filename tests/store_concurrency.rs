//! The store under separate processes at once and under a crash: the built binary run
//! as many processes on one file. Concurrent first `run`s on a missing store all keep
//! their run with distinct ids; readers beside writers never hear "damaged"; a process
//! killed inside a transaction (the test hook `ROLEGATE_TEST_CRASH_AT`) leaves a store
//! the next command opens, with nothing committed lost and nothing half-written kept.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::{REPLY_GOAL, temp_dir};

const KEY: &str = "store-concurrency test signing key, not a real secret";

fn command(store: &Path, args: &[&str]) -> Command {
    if args.contains(&"lena.key") {
        crate::util::register_lena(store, KEY);
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rolegate"));
    cmd.current_dir(store.parent().unwrap());
    cmd.args(args)
        .arg("--store")
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", KEY)
        .env_remove("ROLEGATE_SIGNING_KEY_FILE")
        .env_remove("ROLEGATE_TEST_CRASH_AT");
    cmd
}

fn rolegate(store: &Path, args: &[&str]) -> Output {
    command(store, args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The run ids the store holds, read with SQLite directly.
fn run_ids(store: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(store).unwrap();
    let mut st = conn.prepare("SELECT run_id FROM runs ORDER BY seq").unwrap();
    st.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn concurrent_first_runs_on_a_missing_store_keep_every_run_with_distinct_ids() {
    let dir = temp_dir("store-first-runs");
    let processes = 8;
    for trial in 0..20 {
        let store = dir.join(format!("trial-{trial}.db"));
        let children: Vec<_> = (0..processes)
            .map(|_| {
                command(&store, &["run", "Triage T-601."])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("the binary starts")
            })
            .collect();
        let mut printed = BTreeSet::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "trial {trial}: {}", text(&out.stderr));
            let last = text(&out.stdout).lines().last().unwrap_or_default().to_string();
            printed.insert(last.split_whitespace().next().unwrap_or_default().to_string());
        }
        let stored = run_ids(&store);
        let distinct: BTreeSet<String> = stored.iter().cloned().collect();
        assert_eq!(stored.len(), processes, "trial {trial}: every run kept: {stored:?}");
        assert_eq!(distinct.len(), processes, "trial {trial}: distinct ids: {stored:?}");
        assert_eq!(printed, distinct, "trial {trial}: each process printed the id it stored");
    }
}

#[test]
fn a_deleted_run_row_does_not_make_the_next_run_fail_or_reuse_an_id() {
    let store = temp_dir("store-deleted-run").join("rolegate.db");
    for _ in 0..3 {
        assert_eq!(rolegate(&store, &["run", "Triage T-601."]).status.code(), Some(0));
    }
    rusqlite::Connection::open(&store).unwrap().execute("DELETE FROM runs WHERE run_id = 'run-2'", []).unwrap();
    let next = rolegate(&store, &["run", "Triage T-601."]);
    assert_eq!(next.status.code(), Some(0), "{}", text(&next.stderr));
    assert!(text(&next.stdout).contains("run-4 done"), "{}", text(&next.stdout));
    assert_eq!(run_ids(&store), ["run-1", "run-3", "run-4"]);
}

#[test]
fn readers_beside_writers_never_report_damage() {
    let store = temp_dir("store-readers").join("rolegate.db");
    assert_eq!(rolegate(&store, &["run", "--task", "reply", REPLY_GOAL]).status.code(), Some(0));
    let writers = (0..3).map(|_| {
        let store = store.clone();
        std::thread::spawn(move || (0..12).map(|_| rolegate(&store, &["run", "Triage T-601."])).collect::<Vec<_>>())
    });
    let readers = (0..3).map(|i| {
        let store = store.clone();
        std::thread::spawn(move || {
            let args: &[&str] = if i % 2 == 0 { &["outbox"] } else { &["approvals", "list"] };
            (0..24).map(|_| rolegate(&store, args)).collect::<Vec<_>>()
        })
    });
    let all: Vec<_> = writers.chain(readers).collect::<Vec<_>>().into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(all.len(), 3 * 12 + 3 * 24);
    for out in &all {
        let err = text(&out.stderr);
        assert!(!err.contains("damaged") && !err.contains("backup"), "{err}");
        assert_eq!(out.status.code(), Some(0), "{err}");
    }
    assert_eq!(run_ids(&store).len(), 1 + 3 * 12, "every run kept");
}

/// Parks run-1 on its e-mail (req-1).
fn park(store: &Path) {
    let parked = rolegate(store, &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL]);
    assert_eq!(parked.status.code(), Some(0), "{}", text(&parked.stderr));
}

fn crashed(store: &Path, point: &str, args: &[&str]) {
    let out = command(store, args).env("ROLEGATE_TEST_CRASH_AT", point).output().unwrap();
    assert_eq!(out.status.code(), None, "{point}: the process was killed, not ended: {}", text(&out.stderr));
}

fn sent(store: &Path) -> usize {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().len()
}

fn status_of_req1(store: &Path) -> String {
    let out = rolegate(store, &["approvals", "list", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list[0]["status"].as_str().unwrap_or_default().to_string()
}

const APPROVE: &[&str] = &["approvals", "approve", "req-1", "--key", "lena.key"];

#[test]
fn a_process_killed_before_its_commit_leaves_nothing_half_done_and_the_decision_can_be_taken_again() {
    let store = temp_dir("store-crash-before").join("rolegate.db");
    park(&store);
    crashed(&store, "decide:before_commit", APPROVE);
    assert_eq!((status_of_req1(&store), sent(&store)), ("pending".into(), 0), "the killed decision left nothing");
    let approved = rolegate(&store, APPROVE);
    assert_eq!(approved.status.code(), Some(0), "{}", text(&approved.stderr));
    assert!(text(&approved.stdout).contains("emails_sent=1"), "{}", text(&approved.stdout));
    assert_eq!(sent(&store), 1);
}

#[test]
fn a_run_killed_with_uncommitted_pages_in_the_wal_is_rolled_back_by_sqlite() {
    let store = temp_dir("store-crash-spill").join("rolegate.db");
    park(&store);
    // the one transaction of `--durability exit` (a durable run commits its steps as it goes)
    crashed(
        &store,
        "start:before_commit",
        &["run", "--durability", "exit", "--task", "reply", "--user", "kwame", REPLY_GOAL],
    );
    let mut wal = store.as_os_str().to_owned();
    wal.push("-wal");
    let frames = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(frames > 4096, "the killed run left pages in the WAL ({frames} bytes)");
    assert_eq!(run_ids(&store), ["run-1"], "its uncommitted pages are not read");
    let check = rolegate(&store, &["store", "check"]);
    assert_eq!(check.status.code(), Some(0), "{}{}", text(&check.stdout), text(&check.stderr));
    park(&store);
    assert_eq!(run_ids(&store), ["run-1", "run-2"]);
}

#[test]
fn a_process_killed_after_its_commit_keeps_the_decision_and_nothing_is_sent_twice() {
    let store = temp_dir("store-crash-after").join("rolegate.db");
    park(&store);
    crashed(&store, "decide:after_commit", APPROVE);
    assert_eq!((status_of_req1(&store), sent(&store)), ("approved".into(), 1), "the committed decision is kept");
    let again = rolegate(&store, APPROVE);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("not_pending"), "{}", text(&again.stdout));
    assert_eq!(sent(&store), 1, "never sent twice");
}

#[test]
fn a_run_killed_before_its_commit_files_nothing_and_the_next_run_takes_its_place() {
    let store = temp_dir("store-crash-run").join("rolegate.db");
    park(&store);
    // the one transaction of `--durability exit` (a durable run commits its steps as it goes)
    crashed(
        &store,
        "start:before_commit",
        &["run", "--durability", "exit", "--task", "reply", "--user", "kwame", REPLY_GOAL],
    );
    assert_eq!(run_ids(&store), ["run-1"], "the killed run left no row");
    park(&store);
    assert_eq!(run_ids(&store), ["run-1", "run-2"]);
    let list = text(&rolegate(&store, &["approvals", "list"]).stdout);
    assert_eq!(list.lines().count(), 2, "{list}");
}
