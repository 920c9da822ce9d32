//! Every stored fact is signed (issue 31, items 2 and 3): a store with rows in every table
//! (a parked and approved e-mail, a durable run on a real model, an approver), then each
//! table and each column of it edited in turn, one value at a time: `store check` names
//! the edited row by table (exit 1), or, for the store's own key and format, refuses the
//! whole store by name. The tables are read from the file itself, so a table added later
//! without a signature fails this test.

use std::path::{Path, PathBuf};

use crate::http_server::{Reply, Server};
use crate::util::{REPLY_GOAL, run_binary, stderr, temp_dir};

const KEY: &str = "store-signed test signing key, not a real secret";

/// Columns exempt from the rule, with why: SQLite's own sequence bookkeeping (an edit can
/// only make a later insert fail on its unique id), and the outbox's row number, which
/// orders the rows and names them but states nothing (a sent e-mail is bound to its
/// signed parked action by its contents).
/// A run's lease is exempt too: it says which live process may drive the run now, and no
/// command reads it as something that happened (a forged lease can only make a resume wait
/// or take over; the run's records stay signed).
const EXEMPT: &[(&str, &str)] = &[("sqlite_sequence", "*"), ("outbox", "seq"), ("leases", "*")];

/// The arguments of a durable single run on the real model served at `base`.
fn real_run(base: &str) -> [&str; 7] {
    ["run", "What is the status of T-601?", "--model", "openai:fake-sensible", "--zero-price", "--base-url", base]
}

/// A store with at least one row in every table.
async fn full_store() -> PathBuf {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let dir = temp_dir("store-signed");
    let store = dir.join("rolegate.db");
    let run = |args: Vec<String>| {
        let store = store.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if args.contains(&"lena.key") {
                    crate::util::register_lena(&store, KEY);
                }
                run_binary(&store, KEY, &args)
            })
            .await
            .unwrap()
        }
    };
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let parked = run(s(&["run", "--task", "reply", "--user", "kwame", REPLY_GOAL])).await;
    assert_eq!(parked.status.code(), Some(0), "{}", stderr(&parked));
    let approved = run(s(&["approvals", "approve", "req-1", "--key", "lena.key"])).await;
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let base = server.base_url.clone();
    let durable = run(s(&real_run(&base))).await;
    assert!(matches!(durable.status.code(), Some(0 | 1)), "{}", stderr(&durable));
    store
}

/// `text` changed as an edit by hand would: in a JSON object, its first string value (so the
/// record still reads back), else its last character.
fn edited_text(text: &str) -> String {
    fn first_string(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => {
                s.push('x');
                true
            }
            serde_json::Value::Object(m) => m.values_mut().any(first_string),
            serde_json::Value::Array(a) => a.iter_mut().any(first_string),
            _ => false,
        }
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut v) if v.is_object() => {
            if first_string(&mut v) {
                v.to_string()
            } else {
                format!("{text}x")
            }
        }
        _ => format!("{text}x"),
    }
}

/// `store check` on `store`: its exit code and what it printed.
fn check(store: &Path) -> (Option<i32>, String) {
    let out = run_binary(store, KEY, &["store", "check", "--format", "json"]);
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out)))
}

/// The tables of the file and their columns.
fn columns(c: &rusqlite::Connection) -> Vec<(String, String)> {
    let mut tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    tables.sort();
    let mut out = Vec::new();
    for t in tables {
        let cols: Vec<String> = c
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .unwrap()
            .query_map([&t], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        out.extend(cols.into_iter().map(|col| (t.clone(), col)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_check_names_an_edit_of_every_signed_table_and_column() {
    let store = full_store().await;
    {
        let c = rusqlite::Connection::open(&store).unwrap();
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    }
    assert_eq!(check(&store).0, Some(0), "the untouched store checks clean: {}", check(&store).1);
    let c = rusqlite::Connection::open(&store).unwrap();
    let all = columns(&c);
    drop(c);
    let mut named = Vec::new();
    for (table, column) in &all {
        if EXEMPT.iter().any(|(t, col)| t == table && (*col == "*" || col == column)) {
            continue;
        }
        let copy = store.with_file_name(format!("edit-{table}-{column}.db"));
        std::fs::copy(&store, &copy).unwrap();
        let c = rusqlite::Connection::open(&copy).unwrap();
        let count: i64 = c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap();
        assert!(count > 0, "the store has a row in {table}");
        // one value of the first row changed so that it still reads back: a number moved on,
        // a JSON text with its first string value changed (still the same shape), any
        // other text changed at its end
        let rowid: i64 = c.query_row(&format!("SELECT min(rowid) FROM {table}"), [], |r| r.get(0)).unwrap();
        let value: rusqlite::types::Value =
            c.query_row(&format!("SELECT {column} FROM {table} WHERE rowid = ?1"), [rowid], |r| r.get(0)).unwrap();
        let edited = match value {
            rusqlite::types::Value::Integer(n) => rusqlite::types::Value::Integer(n + 7),
            rusqlite::types::Value::Text(t) => rusqlite::types::Value::Text(edited_text(&t)),
            other => panic!("{table}.{column} holds {other:?}"),
        };
        let edit = format!("UPDATE {table} SET {column} = ?1 WHERE rowid = ?2");
        c.execute(&edit, rusqlite::params![edited, rowid]).unwrap();
        drop(c);
        let (code, out) = check(&copy);
        if *table == "meta" {
            // the store's own key id and format: the whole store is refused by name
            assert_eq!(code, Some(2), "meta.{column}: {out}");
            assert!(out.contains("key") || out.contains("format") || out.contains("not a rolegate store"), "{out}");
        } else {
            assert_eq!(code, Some(1), "an edit of {table}.{column} is named: {out}");
            let json = out.get(..out.rfind(']').map_or(0, |i| i + 1)).unwrap_or_default();
            let bad: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
            let tables: Vec<&str> = bad.as_array().into_iter().flatten().filter_map(|b| b["table"].as_str()).collect();
            assert!(tables.contains(&table.as_str()), "an edit of {table}.{column} names {table}: {out}");
        }
        named.push(format!("{table}.{column}"));
    }
    // every table of the store was edited somewhere
    for t in [
        "runs",
        "checkpoints",
        "requests",
        "approval_audit",
        "gate_audit",
        "pending",
        "outbox",
        "approvers",
        "decisions",
        "steps",
        "exchanges",
        "meta",
    ] {
        assert!(named.iter().any(|n| n.starts_with(&format!("{t}."))), "{t} was never edited: {named:?}");
    }
    println!("named on edit: {}", named.join(", "));
}

/// A durable run's spec names its endpoint; the spec is signed, so an edit that points
/// `resume` at another server is refused before any request, and a run started without a
/// key is resumed without one even when `ROLEGATE_API_KEY` is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_never_sends_the_key_elsewhere_or_to_a_run_that_had_none() {
    let recorded = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let elsewhere = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let dir = temp_dir("store-signed-resume");
    let store = dir.join("rolegate.db");
    let (store2, base) = (store.clone(), recorded.base_url.clone());
    // a durable run held after its first record and killed, started without a key
    let held = tokio::task::spawn_blocking(move || {
        let mut c = crate::util::on_store(&store2, KEY, &real_run(&base));
        c.env("ROLEGATE_TEST_CRASH_AT", "durable:after_commit:2").env_remove("ROLEGATE_API_KEY");
        c.output().unwrap()
    })
    .await
    .unwrap();
    assert_ne!(held.status.code(), Some(0), "the run was stopped after its second record");
    let spec_of = |c: &rusqlite::Connection| -> String {
        c.query_row("SELECT spec FROM runs WHERE run_id = 'run-1'", [], |r| r.get(0)).unwrap()
    };
    // the resume with a key in the environment sends none: the run had none
    let copy = store.with_file_name("keyless.db");
    std::fs::copy(&store, &copy).unwrap();
    let _ = std::fs::copy(store.with_extension("db-wal"), copy.with_extension("db-wal"));
    let before = recorded.seen().len();
    let out = tokio::task::spawn_blocking(move || {
        let mut c = crate::util::on_store(&copy, KEY, &["resume", "run-1"]);
        c.env("ROLEGATE_API_KEY", "sk-resume-secret-not-real");
        c.output().unwrap()
    })
    .await
    .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let asked: Vec<_> = recorded.seen().into_iter().skip(before).collect();
    assert!(!asked.is_empty(), "the resumed run asked its own server");
    assert!(asked.iter().all(|s| s.authorization.is_none()), "no key was sent: {:?}", asked[0].authorization);
    // the spec edited to point at another server: refused before any request
    let c = rusqlite::Connection::open(&store).unwrap();
    let edited = spec_of(&c).replace(&recorded.base_url, &elsewhere.base_url);
    c.execute("UPDATE runs SET spec = ?1 WHERE run_id = 'run-1'", [&edited]).unwrap();
    drop(c);
    let store3 = store.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut c = crate::util::on_store(&store3, KEY, &["resume", "run-1"]);
        c.env("ROLEGATE_API_KEY", "sk-resume-secret-not-real");
        c.output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "refused: {}", stderr(&out));
    assert!(stderr(&out).contains("run run-1") && stderr(&out).contains("edited"), "{}", stderr(&out));
    assert!(elsewhere.seen().is_empty(), "the other server was never asked");
    let (code, printed) = check(&store);
    assert_eq!(code, Some(1), "{printed}");
    assert!(printed.contains("\"table\":\"runs\"") || printed.contains("\"runs\""), "{printed}");
}
