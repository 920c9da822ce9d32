//! Durable runs on a real model, in separate processes against a loopback
//! OpenAI-compatible server the test starts: the built binary runs `--model openai:…
//! --store`, is held right after its K-th durable record committed (a step or a model
//! exchange) and killed with `SIGKILL`, and `rolegate resume` carries the run to the end,
//! the trace and the rows of the same run never interrupted, while the server receives no
//! request twice (every exchange the killed process made is answered from the store). A
//! stored exchange edited in the file refuses the resume by name, and a run started with
//! an API key does not resume without one; in both cases nothing runs and the server hears
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rolegate::multi::Behaviours;

use crate::durable_support::{counts, first_status, held_and_killed, printed};
use crate::http_server::{Reply, Server, text};
use crate::util::{REPLY_GOAL, on_store, stderr, stdout, temp_dir};

const KEY: &str = "durable-http test signing key, not a real secret";
const API_KEY: &str = "sk-durable-http-test-key";

/// The binary on `store` with the signing key, the API key (unless `api_key` is false)
/// and, when given, the crash point; other settings from the environment removed.
fn command(store: &Path, args: &[&str], api_key: bool, crash: Option<&str>) -> Command {
    let mut c = on_store(store, KEY, args);
    c.env_remove("ROLEGATE_BASE_URL").env_remove("ROLEGATE_TOOL_MODE");
    if api_key {
        c.env("ROLEGATE_API_KEY", API_KEY);
    } else {
        c.env_remove("ROLEGATE_API_KEY");
    }
    if let Some(point) = crash {
        c.env("ROLEGATE_TEST_CRASH_AT", point);
    }
    c
}

/// Runs the binary to its end (off the runtime, so the server keeps answering).
async fn rolegate(store: &Path, args: &[&str], api_key: bool) -> Output {
    let mut c = command(store, args, api_key, None);
    tokio::task::spawn_blocking(move || c.output().expect("the binary runs")).await.unwrap()
}

/// Starts the run held after its `k`-th durable record and kills it with `SIGKILL`; false
/// when the run has fewer records (it then ended by itself).
async fn killed_after(store: &Path, args: &[&str], k: u64) -> bool {
    let c = command(store, args, true, Some(&format!("durable:hold_after_commit:{k}")));
    tokio::task::spawn_blocking(move || held_and_killed(c, &k.to_string())).await.unwrap()
}

/// `(checkpoints, journal records, model exchanges, gate audit rows)` of `run-1`.
fn rows_of(store: &Path) -> [i64; 4] {
    counts(
        store,
        [
            "SELECT count(*) FROM checkpoints WHERE run_id = 'run-1'",
            "SELECT count(*) FROM steps WHERE run_id = 'run-1'",
            "SELECT count(*) FROM exchanges WHERE run_id = 'run-1'",
            "SELECT count(*) FROM gate_audit WHERE run_id = 'run-1'",
        ],
    )
}

async fn status(store: &Path) -> String {
    first_status(&rolegate(store, &["runs", "list", "--format", "json"], true).await)
}

/// The run uninterrupted, then killed after each of its durable records K and resumed:
/// the same printed trace, exit code and rows, the server asked exactly as often as by the
/// uninterrupted run (no request twice), and the resumed process asking only what the
/// killed one had not. Returns how many records were tried and how many of them the run
/// answered from its stored exchanges on resume.
async fn every_record_resumes_the_same(name: &str, server: &Server, args: &[&str]) -> (u64, usize) {
    let base = temp_dir(&format!("durable-http-{name}"));
    let plain = base.join("plain.db");
    let before = server.seen().len();
    let whole = rolegate(&plain, args, true).await;
    assert!(matches!(whole.status.code(), Some(0 | 1)), "{}{}", stdout(&whole), stderr(&whole));
    let asked = server.seen().len() - before;
    assert!(asked >= 2, "{name}: the run asks the server ({asked})");
    let expected = (printed(&whole, &plain), whole.status.code(), rows_of(&plain));
    assert_eq!(expected.2[2], i64::try_from(asked).unwrap(), "{name}: every exchange is kept");
    let mut spared = 0;
    let mut k = 1;
    loop {
        let store = base.join(format!("killed-{k}.db"));
        let before = server.seen().len();
        if !killed_after(&store, args, k).await {
            break;
        }
        let asked_killed = server.seen().len() - before;
        assert_eq!(status(&store).await, "interrupted", "{name} {k}");
        let resumed = rolegate(&store, &["resume", "run-1"], true).await;
        assert_eq!(
            (printed(&resumed, &store), resumed.status.code(), rows_of(&store)),
            expected,
            "{name}: SIGKILL after record {k}: {}",
            stderr(&resumed)
        );
        assert_eq!(
            server.seen().len() - before,
            asked,
            "{name} {k}: killed ({asked_killed} requests) and resumed, the server was asked no request twice"
        );
        spared += asked_killed;
        let check = rolegate(&store, &["store", "check"], true).await;
        assert_eq!(check.status.code(), Some(0), "{}{}", stdout(&check), stderr(&check));
        k += 1;
    }
    (k - 1, spared)
}

#[tokio::test]
async fn a_single_run_on_a_real_model_killed_after_each_record_resumes_to_the_same_end_asking_nothing_twice() {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let url = server.base_url.clone();
    let goal = "What is the status of T-601 and our refund policy?";
    let args = ["run", goal, "--model", "openai:fake-sensible", "--base-url", &url, "--retries", "0"];
    let (records, spared) = every_record_resumes_the_same("single", &server, &args).await;
    assert!(records >= 5, "a checkpoint and an exchange per step ({records})");
    assert!(spared > 0, "the resumed runs were spared the exchanges already made");
    assert!(server.seen().iter().all(|s| s.authorization.as_deref() == Some(&format!("Bearer {API_KEY}")[..])));
}

#[tokio::test]
async fn a_three_role_run_on_real_models_killed_after_each_record_resumes_to_the_same_verdict_asking_nothing_twice() {
    let server = Server::start(Vec::new(), Some(Reply::Roles(Behaviours::default()))).await;
    let url = server.base_url.clone();
    let goal = "Status of T-601 and our refund policy?";
    let args = [
        "run",
        "--design",
        "multi",
        goal,
        "--model",
        "openai:local-model",
        "--zero-price",
        "--reviewer-max-tokens",
        "300",
        "--base-url",
        &url,
        "--retries",
        "0",
    ];
    let (records, spared) = every_record_resumes_the_same("multi", &server, &args).await;
    assert!(records >= 6, "hand-offs, researcher steps and every role's exchange ({records})");
    assert!(spared > 0);
    // the reviewer's own allowance was kept in the spec and rebuilt on resume
    assert!(server.seen().iter().any(|s| s.body["max_tokens"] == 300));
}

#[tokio::test]
async fn a_plan_and_a_policypal_run_on_a_real_model_killed_after_their_first_records_resume_asking_nothing_twice() {
    let goal = "What is the status of T-601 and our refund policy?";
    let plan = r#"{"steps":[{"tool":"get_ticket","arguments":{"ticket_id":"T-601"},"reason":"read the ticket"},{"tool":"lookup_document","arguments":{"doc_id":"kc-returns-v3"},"reason":"read the policy"}]}"#;
    // the planner's answer for the uninterrupted run and each killed one (a resume asks
    // nothing it was answered already); PolicyPal's answers from the fake model after it
    let script = vec![text(plan, Some((160, 40))), text(plan, Some((160, 40))), text(plan, Some((160, 40)))];
    let server = Server::start(script, Some(Reply::Fake)).await;
    let url = server.base_url.clone();
    for (name, design, model) in
        [("plan", "plan", "openai:fake-sensible"), ("policypal", "policypal", "openai:fake-sensible")]
    {
        let args = ["run", "--design", design, goal, "--model", model, "--base-url", &url, "--retries", "0"];
        let base = temp_dir(&format!("durable-http-{name}"));
        let plain = base.join("plain.db");
        let before = server.seen().len();
        let whole = rolegate(&plain, &args, true).await;
        assert_eq!(whole.status.code(), Some(0), "{name}: {}{}", stdout(&whole), stderr(&whole));
        assert!(stdout(&whole).contains(" done "), "{name}: {}", stdout(&whole));
        let asked = server.seen().len() - before;
        assert_eq!(i64::try_from(asked).unwrap(), rows_of(&plain)[2], "{name}: every exchange kept");
        for k in [1, 2] {
            let store = base.join(format!("killed-{k}.db"));
            let before = server.seen().len();
            assert!(killed_after(&store, &args, k).await, "{name} {k}");
            let resumed = rolegate(&store, &["resume", "run-1"], true).await;
            assert_eq!(
                (printed(&resumed, &store), resumed.status.code(), rows_of(&store)),
                (printed(&whole, &plain), whole.status.code(), rows_of(&plain)),
                "{name} {k}: {}",
                stderr(&resumed)
            );
            assert_eq!(server.seen().len() - before, asked, "{name} {k}: no request twice");
        }
    }
}

/// A store with run-1 killed after its 4th durable record (two exchanges and two
/// checkpoints in), and the arguments that ran it.
async fn interrupted(name: &str, server: &Server) -> PathBuf {
    let store = temp_dir(&format!("durable-http-{name}")).join("rolegate.db");
    let url = server.base_url.clone();
    let args = ["run", REPLY_GOAL, "--model", "openai:fake-sensible", "--base-url", &url, "--retries", "0"];
    assert!(killed_after(&store, &args, 4).await, "{name}: held after record 4");
    assert!(rows_of(&store)[2] >= 1, "{name}: an exchange is stored");
    store
}

#[tokio::test]
async fn a_tampered_stored_exchange_refuses_the_resume_by_name_and_nothing_runs() {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let store = interrupted("tampered", &server).await;
    {
        let c = rusqlite::Connection::open(&store).unwrap();
        let edited = c
            .execute(
                "UPDATE exchanges SET answer = replace(answer, 'get_ticket', 'lookup_document')
                 WHERE run_id = 'run-1' AND rowid = (SELECT min(rowid) FROM exchanges)",
                [],
            )
            .unwrap();
        assert_eq!(edited, 1);
    }
    let rows = rows_of(&store);
    let asked = server.seen().len();
    let resumed = rolegate(&store, &["resume", "run-1"], true).await;
    assert_eq!(resumed.status.code(), Some(2), "{}{}", stdout(&resumed), stderr(&resumed));
    let err = stderr(&resumed);
    assert!(err.contains("exchanges run-1/") && err.contains("refused: bad_signature"), "{err}");
    assert!(err.contains("nothing ran"), "{err}");
    assert_eq!(server.seen().len(), asked, "the server heard nothing");
    assert_eq!(rows_of(&store), rows, "nothing was written");
    assert_eq!(status(&store).await, "interrupted");
    let check = rolegate(&store, &["store", "check"], true).await;
    assert_ne!(check.status.code(), Some(0));
    assert!(stdout(&check).contains("exchanges") && stdout(&check).contains("bad_signature"), "{}", stdout(&check));
}

#[tokio::test]
async fn a_run_started_with_an_api_key_does_not_resume_without_one_and_nothing_runs() {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let store = interrupted("no-key", &server).await;
    let rows = rows_of(&store);
    let asked = server.seen().len();
    let resumed = rolegate(&store, &["resume", "run-1"], false).await;
    assert_eq!(resumed.status.code(), Some(2), "{}{}", stdout(&resumed), stderr(&resumed));
    let err = stderr(&resumed);
    assert!(err.contains("run-1: its model client cannot be rebuilt: missing_api_key"), "{err}");
    assert!(err.contains("ROLEGATE_API_KEY") && err.contains("nothing ran"), "{err}");
    assert!(!err.contains(API_KEY));
    assert_eq!(server.seen().len(), asked, "the server heard nothing");
    assert_eq!(rows_of(&store), rows, "nothing was written");
    // the key is nowhere in the store
    let bytes = std::fs::read(&store).unwrap();
    assert!(!bytes.windows(API_KEY.len()).any(|w| w == API_KEY.as_bytes()));
    // with the key again, the run carries on to its end
    let again = rolegate(&store, &["resume", "run-1"], true).await;
    assert!(matches!(again.status.code(), Some(0 | 1)), "{}", stderr(&again));
    assert_ne!(status(&store).await, "interrupted");
}

#[tokio::test]
async fn a_durable_run_refuses_a_recording_and_a_price_table_before_anything_runs() {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let url = server.base_url.clone();
    let dir = temp_dir("durable-http-flags");
    let store = dir.join("rolegate.db");
    let cache = dir.join("cache").display().to_string();
    for (extra, says) in [(["--cache", cache.as_str()], "--cache"), (["--prices", "prices.json"], "--prices")] {
        let mut args = vec!["run", "Check T-601.", "--model", "openai:fake-sensible", "--base-url", &url];
        args.extend(extra);
        let out = rolegate(&store, &args, true).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    assert!(server.seen().is_empty());
}

/// `runs list` counts the model exchanges each run recorded: a run on a real model as many
/// as the server answered it, an interrupted one those it kept before the kill, a run on
/// the fakes none; the table has the same column.
#[tokio::test]
async fn runs_list_shows_how_many_model_exchanges_each_run_recorded() {
    let server = Server::start(Vec::new(), Some(Reply::Fake)).await;
    let store = interrupted("runs-list", &server).await;
    let kept = rows_of(&store)[2];
    let url = server.base_url.clone();
    let before = server.seen().len();
    let goal = "What is the status of T-601 and our refund policy?";
    let args = ["run", goal, "--model", "openai:fake-sensible", "--base-url", &url, "--retries", "0"];
    let whole = rolegate(&store, &args, true).await;
    assert!(matches!(whole.status.code(), Some(0 | 1)), "{}", stderr(&whole));
    let asked = i64::try_from(server.seen().len() - before).unwrap();
    assert!(asked >= 2, "{asked}");
    let fakes = ["run", "--design", "multi", "--user", "kwame", "Status of T-601 and our refund policy?"];
    assert_eq!(rolegate(&store, &fakes, true).await.status.code(), Some(0));

    let json = rolegate(&store, &["runs", "list", "--format", "json"], true).await;
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let exchanges: Vec<(String, i64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run_id"].as_str().unwrap().to_string(), r["exchanges"].as_i64().unwrap()))
        .collect();
    assert!(kept >= 1, "the killed run kept an exchange");
    assert_eq!(exchanges, [("run-1".to_string(), kept), ("run-2".to_string(), asked), ("run-3".to_string(), 0)]);

    let table = stdout(&rolegate(&store, &["runs", "list"], true).await);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    let at = lines[0].iter().position(|h| *h == "exchanges").expect("an exchanges column");
    let shown: Vec<&str> = lines[1..].iter().map(|l| l[at]).collect();
    assert_eq!(shown, [kept.to_string(), asked.to_string(), "0".to_string()], "{table}");
}

/// Issue 32, defect 6: a durable run on a real model parked for an approval is decided by
/// `approvals approve` (its model rebuilt from the run's recorded settings, not refused as
/// an unknown model), runs the approved e-mail once and carries on asking its own server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_durable_run_on_a_real_model_is_decided_and_carries_on() {
    use crate::http_server::{Server, tool_call};
    let finish =
        tool_call("finish", serde_json::json!({"answer": "Drafted the reply.", "sources": ["o1", "o2"]}), None);
    let server = Server::start(
        vec![
            tool_call("get_ticket", serde_json::json!({"ticket_id": "T-601"}), None),
            tool_call("lookup_document", serde_json::json!({"doc_id": "kc-returns-v3"}), None),
            tool_call(
                "send_email_draft",
                serde_json::json!({"to": "kwame@example.com", "subject": "Your return", "body": "Draft based on o2", "idempotency_key": "rm-1"}),
                None,
            ),
            finish.clone(),
        ],
        Some(finish),
    )
    .await;
    let dir = crate::util::temp_dir("durable-http-approve");
    let store = dir.join("rolegate.db");
    const KEY: &str = "durable-http approve test key, not a real secret";
    let (store2, base) = (store.clone(), server.base_url.clone());
    let parked = tokio::task::spawn_blocking(move || {
        let args = [
            "run",
            "--task",
            "reply",
            "--grant",
            "send_email_draft",
            "--user",
            "kwame",
            "--model",
            "openai:fake-sensible",
            "--zero-price",
            "--base-url",
            &base,
            crate::util::REPLY_GOAL,
        ];
        crate::util::run_binary(&store2, KEY, &args)
    })
    .await
    .unwrap();
    let text = crate::util::stdout(&parked);
    assert!(text.contains("approval needed: req-1"), "{text}{}", crate::util::stderr(&parked));
    let asked = server.seen().len();
    let store3 = store.clone();
    let approved = tokio::task::spawn_blocking(move || {
        crate::util::register_lena(&store3, KEY);
        crate::util::run_binary(&store3, KEY, &["approvals", "approve", "req-1", "--key", "lena.key"])
    })
    .await
    .unwrap();
    assert_eq!(approved.status.code(), Some(0), "{}{}", crate::util::stdout(&approved), crate::util::stderr(&approved));
    assert!(crate::util::stdout(&approved).contains("emails_sent=1"), "{}", crate::util::stdout(&approved));
    assert!(server.seen().len() > asked, "the run carried on asking its server");
}
