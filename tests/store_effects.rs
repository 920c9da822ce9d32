//! Effects last: every output sink is written and flushed before the store commits, so a
//! sink that cannot be written (`--trace-json /dev/full`) ends the command with nothing
//! filed, decided or sent (exit 2, and it says so); the same command without the broken
//! sink then works, once.

use std::path::Path;
use std::process::Output;

use crate::util::{REPLY_GOAL, temp_dir};
use crate::util::{stderr, stdout};

const KEY: &str = "store-effects test signing key, not a real secret";

fn rolegate(store: &Path, args: &[&str]) -> Output {
    if args.contains(&"lena.key") {
        crate::util::register_lena(store, KEY);
    }
    crate::util::run_binary(store, KEY, args)
}

fn sent(store: &Path) -> usize {
    let out = rolegate(store, &["outbox", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().len()
}

fn requests(store: &Path) -> Vec<(String, String)> {
    let out = rolegate(store, &["approvals", "list", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r["status"].as_str().unwrap().to_string()))
        .collect()
}

const REPLY: &[&str] = &["run", "--task", "reply", "--user", "kwame", REPLY_GOAL];

#[test]
fn an_approval_whose_trace_sink_cannot_be_written_sends_nothing_and_says_so() {
    let store = temp_dir("effects-approve").join("rolegate.db");
    assert_eq!(rolegate(&store, REPLY).status.code(), Some(0));
    let out = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key", "--trace-json", "/dev/full"]);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--trace-json") && err.contains("nothing was filed, decided or sent"), "{err}");
    assert_eq!(sent(&store), 0, "no e-mail left before the sink failed");
    assert_eq!(requests(&store), [("req-1".to_string(), "pending".to_string())]);
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(sent(&store), 1, "approved once, sent once");
}

#[test]
fn a_run_whose_trace_sink_cannot_be_written_files_no_request_and_a_retry_files_one() {
    let store = temp_dir("effects-run").join("rolegate.db");
    let mut args = REPLY.to_vec();
    args.extend(["--trace-json", "/dev/full"]);
    let out = rolegate(&store, &args);
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("nothing was filed, decided or sent"), "{}", stderr(&out));
    assert!(requests(&store).is_empty(), "no request was filed");
    assert_eq!(rolegate(&store, REPLY).status.code(), Some(0), "the retry");
    assert_eq!(requests(&store), [("req-1".to_string(), "pending".to_string())], "one request, not two");
    let ok = rolegate(&store, &["approvals", "approve", "req-1", "--key", "lena.key"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(sent(&store), 1, "one e-mail, never two identical ones");
}
